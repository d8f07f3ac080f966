// Time-series charts drawn by hand on <canvas>: lines or stacked areas over a sliding window.

function cssVar(el, name, fallback) {
  const v = getComputedStyle(el).getPropertyValue(name).trim();
  return v || fallback;
}

/** Grid step and top of the y axis for counts up to `v` (integer steps, at most ~5 lines). */
function niceScale(v) {
  const raw = Math.max(v, 1) / 4;
  const p = 10 ** Math.floor(Math.log10(raw));
  let step = 10 * p;
  for (const m of [1, 2, 5]) {
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  }
  step = Math.max(1, step);
  return { step, top: Math.max(step, Math.ceil(v / step) * step) };
}

/**
 * A chart over `series` [{key, label, color (CSS var name)}]; `stacked` draws stacked areas.
 * Samples are pushed with push(tMillis, {key: value}); the window is `windowMs` long.
 * The canvas gets role="img" and an aria-label summing up the latest values.
 */
export class TimeChart {
  constructor(canvas, { series, stacked = false, windowMs = 5 * 60 * 1000, title = "", capacity = 4000 }) {
    this.canvas = canvas;
    this.series = series;
    this.stacked = stacked;
    this.windowMs = windowMs;
    this.title = title;
    this.capacity = capacity;
    this.t = [];
    this.values = Object.fromEntries(series.map((s) => [s.key, []]));
    this.samples = 0;
    this.dirty = true;
    canvas.setAttribute("role", "img");
    if (typeof ResizeObserver !== "undefined") {
      this.ro = new ResizeObserver(() => {
        this.dirty = true;
        this.draw();
      });
      this.ro.observe(canvas);
    }
  }

  push(t, row) {
    this.t.push(t);
    for (const s of this.series) this.values[s.key].push(Number(row[s.key]) || 0);
    if (this.t.length > this.capacity) {
      const cut = this.t.length - this.capacity;
      this.t.splice(0, cut);
      for (const s of this.series) this.values[s.key].splice(0, cut);
    }
    this.samples += 1;
    this.canvas.dataset.samples = String(this.samples);
    const latest = this.series.map((s) => `${s.label} ${fmt(row[s.key])}`).join(", ");
    this.canvas.setAttribute("aria-label", `${this.title}: ${latest}`);
    this.dirty = true;
  }

  /**
   * Samples from before the page was opened (the server's history), [{t, row}] oldest first:
   * those older than the first sample already held go in front; the rest are dropped.
   */
  load(samples) {
    const first = this.t.length ? this.t[0] : Infinity;
    const older = samples.filter((s) => s.t < first);
    if (!older.length) return;
    this.t.unshift(...older.map((s) => s.t));
    for (const s of this.series) this.values[s.key].unshift(...older.map((x) => Number(x.row[s.key]) || 0));
    if (this.t.length > this.capacity) {
      const cut = this.t.length - this.capacity;
      this.t.splice(0, cut);
      for (const s of this.series) this.values[s.key].splice(0, cut);
    }
    this.canvas.dataset.history = String(older.length);
    this.dirty = true;
  }

  setWindow(ms) {
    this.windowMs = ms;
    this.dirty = true;
  }

  destroy() {
    if (this.ro) this.ro.disconnect();
  }

  draw() {
    if (!this.dirty) return;
    const c = this.canvas;
    const w = c.clientWidth;
    const hgt = c.clientHeight;
    if (!w || !hgt) return; // not visible
    this.dirty = false;
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(hgt * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(hgt * dpr);
    }
    const ctx = c.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const fg = cssVar(c, "--muted", "#666");
    const grid = cssVar(c, "--grid", "#ddd");
    const font = `11px ${cssVar(document.body, "--font", "system-ui, sans-serif")}`;
    ctx.font = font;
    const padL = 34;
    const padR = 6;
    const padT = 6;
    const padB = 16;
    const pw = Math.max(10, w - padL - padR);
    const ph = Math.max(10, hgt - padT - padB);
    const now = this.t.length ? Math.max(this.t[this.t.length - 1], Date.now() - 1500) : Date.now();
    const t0 = now - this.windowMs;
    let lo = 0;
    while (lo < this.t.length - 1 && this.t[lo + 1] < t0) lo++;
    const n = this.t.length;
    // y range
    let vmax = 0;
    for (let i = lo; i < n; i++) {
      if (this.stacked) {
        let sum = 0;
        for (const s of this.series) sum += this.values[s.key][i];
        vmax = Math.max(vmax, sum);
      } else {
        for (const s of this.series) vmax = Math.max(vmax, this.values[s.key][i]);
      }
    }
    const { step: ystep, top: ymax } = niceScale(vmax);
    const x = (t) => padL + ((t - t0) / this.windowMs) * pw;
    const y = (v) => padT + ph - (v / ymax) * ph;
    // grid and labels
    ctx.strokeStyle = grid;
    ctx.fillStyle = fg;
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let v = 0; v <= ymax + ystep / 2; v += ystep) {
      const yy = Math.round(y(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(padL, yy);
      ctx.lineTo(padL + pw, yy);
      ctx.stroke();
      ctx.fillText(fmt(v), padL - 4, yy);
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const minutes = this.windowMs / 60000;
    const step = minutes <= 5 ? 1 : minutes <= 15 ? 5 : 10;
    for (let m = 0; m <= minutes; m += step) {
      const xx = x(now - m * 60000);
      ctx.fillText(m === 0 ? "now" : `-${m}m`, Math.min(Math.max(xx, padL + 10), padL + pw - 12), padT + ph + 3);
    }
    if (n === 0) return;
    ctx.save();
    ctx.beginPath();
    ctx.rect(padL, padT, pw, ph);
    ctx.clip();
    if (this.stacked) {
      const base = new Float64Array(n);
      for (const s of this.series) {
        const col = cssVar(c, s.color, "#888");
        const vals = this.values[s.key];
        ctx.beginPath();
        for (let i = lo; i < n; i++) ctx.lineTo(x(this.t[i]), y(base[i] + vals[i]));
        for (let i = n - 1; i >= lo; i--) ctx.lineTo(x(this.t[i]), y(base[i]));
        ctx.closePath();
        ctx.globalAlpha = 0.75;
        ctx.fillStyle = col;
        ctx.fill();
        ctx.globalAlpha = 1;
        for (let i = lo; i < n; i++) base[i] += vals[i];
      }
    } else {
      for (const s of this.series) {
        const col = cssVar(c, s.color, "#888");
        const vals = this.values[s.key];
        ctx.strokeStyle = col;
        ctx.lineWidth = s.width || 2;
        ctx.setLineDash(s.dash || []);
        ctx.beginPath();
        // step line: a value holds until the next sample
        for (let i = lo; i < n; i++) {
          const xx = x(this.t[i]);
          if (i === lo) ctx.moveTo(xx, y(vals[i]));
          else {
            ctx.lineTo(xx, y(vals[i - 1]));
            ctx.lineTo(xx, y(vals[i]));
          }
        }
        ctx.lineTo(x(now), y(vals[n - 1]));
        ctx.stroke();
      }
      ctx.setLineDash([]);
    }
    ctx.restore();
  }
}

function fmt(v) {
  const n = Number(v) || 0;
  if (Math.abs(n) >= 10000) return `${(n / 1000).toFixed(0)}k`;
  if (Math.abs(n) >= 1000) return `${(n / 1000).toFixed(1)}k`;
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}
