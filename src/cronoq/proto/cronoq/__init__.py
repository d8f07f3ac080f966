"""Proto package ``cronoq`` (mirrors the proto package path ``cronoq.v1``)."""
