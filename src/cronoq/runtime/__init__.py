"""The asyncio runtime around the engine: Scheduler, Pool, Task, handles, contexts, events."""
