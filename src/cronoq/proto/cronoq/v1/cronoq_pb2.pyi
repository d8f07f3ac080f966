from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_UNSPECIFIED: _ClassVar[Priority]
    PRIORITY_CRITICAL: _ClassVar[Priority]
    PRIORITY_HIGH: _ClassVar[Priority]
    PRIORITY_NORMAL: _ClassVar[Priority]
    PRIORITY_LOW: _ClassVar[Priority]

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATUS_UNSPECIFIED: _ClassVar[TaskStatus]
    TASK_STATUS_BLOCKED: _ClassVar[TaskStatus]
    TASK_STATUS_SCHEDULED: _ClassVar[TaskStatus]
    TASK_STATUS_READY: _ClassVar[TaskStatus]
    TASK_STATUS_RUNNING: _ClassVar[TaskStatus]
    TASK_STATUS_RETRYING: _ClassVar[TaskStatus]
    TASK_STATUS_SUCCEEDED: _ClassVar[TaskStatus]
    TASK_STATUS_FAILED: _ClassVar[TaskStatus]
    TASK_STATUS_DEAD_LETTERED: _ClassVar[TaskStatus]
    TASK_STATUS_CANCELLED: _ClassVar[TaskStatus]
    TASK_STATUS_SKIPPED: _ClassVar[TaskStatus]
    TASK_STATUS_MISSED: _ClassVar[TaskStatus]
    TASK_STATUS_SHED: _ClassVar[TaskStatus]

class EdgeCond(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EDGE_COND_UNSPECIFIED: _ClassVar[EdgeCond]
    EDGE_COND_ON_SUCCESS: _ClassVar[EdgeCond]
    EDGE_COND_ON_COMPLETE: _ClassVar[EdgeCond]
    EDGE_COND_ON_FAILURE: _ClassVar[EdgeCond]

class MissPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISS_POLICY_UNSPECIFIED: _ClassVar[MissPolicy]
    MISS_POLICY_RUN_LATE: _ClassVar[MissPolicy]
    MISS_POLICY_SKIP: _ClassVar[MissPolicy]
    MISS_POLICY_FAIL: _ClassVar[MissPolicy]

class Overlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_UNSPECIFIED: _ClassVar[Overlap]
    OVERLAP_SKIP: _ClassVar[Overlap]
    OVERLAP_ALLOW: _ClassVar[Overlap]
    OVERLAP_QUEUE: _ClassVar[Overlap]
    OVERLAP_QUEUE_ON_SUCCESS: _ClassVar[Overlap]
PRIORITY_UNSPECIFIED: Priority
PRIORITY_CRITICAL: Priority
PRIORITY_HIGH: Priority
PRIORITY_NORMAL: Priority
PRIORITY_LOW: Priority
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_BLOCKED: TaskStatus
TASK_STATUS_SCHEDULED: TaskStatus
TASK_STATUS_READY: TaskStatus
TASK_STATUS_RUNNING: TaskStatus
TASK_STATUS_RETRYING: TaskStatus
TASK_STATUS_SUCCEEDED: TaskStatus
TASK_STATUS_FAILED: TaskStatus
TASK_STATUS_DEAD_LETTERED: TaskStatus
TASK_STATUS_CANCELLED: TaskStatus
TASK_STATUS_SKIPPED: TaskStatus
TASK_STATUS_MISSED: TaskStatus
TASK_STATUS_SHED: TaskStatus
EDGE_COND_UNSPECIFIED: EdgeCond
EDGE_COND_ON_SUCCESS: EdgeCond
EDGE_COND_ON_COMPLETE: EdgeCond
EDGE_COND_ON_FAILURE: EdgeCond
MISS_POLICY_UNSPECIFIED: MissPolicy
MISS_POLICY_RUN_LATE: MissPolicy
MISS_POLICY_SKIP: MissPolicy
MISS_POLICY_FAIL: MissPolicy
OVERLAP_UNSPECIFIED: Overlap
OVERLAP_SKIP: Overlap
OVERLAP_ALLOW: Overlap
OVERLAP_QUEUE: Overlap
OVERLAP_QUEUE_ON_SUCCESS: Overlap

class TaskRef(_message.Message):
    __slots__ = ("id", "key")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    id: int
    key: str
    def __init__(self, id: _Optional[int] = ..., key: _Optional[str] = ...) -> None: ...

class Dep(_message.Message):
    __slots__ = ("target", "cond")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    COND_FIELD_NUMBER: _ClassVar[int]
    target: TaskRef
    cond: EdgeCond
    def __init__(self, target: _Optional[_Union[TaskRef, _Mapping]] = ..., cond: _Optional[_Union[EdgeCond, str]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_backoff_s", "multiplier", "max_backoff_s", "jitter")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_BACKOFF_S_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    MAX_BACKOFF_S_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_backoff_s: float
    multiplier: float
    max_backoff_s: float
    jitter: bool
    def __init__(self, max_attempts: _Optional[int] = ..., initial_backoff_s: _Optional[float] = ..., multiplier: _Optional[float] = ..., max_backoff_s: _Optional[float] = ..., jitter: _Optional[bool] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("payload", "content_type", "kind", "pool", "priority", "key", "deadline_in_s", "deadline_unix_ns", "start_in_s", "start_unix_ns", "tolerance_s", "on_miss", "duration_hint_s", "timeout_s", "retry", "deps", "resources", "tags", "labels", "tenant")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_IN_S_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    START_IN_S_FIELD_NUMBER: _ClassVar[int]
    START_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_S_FIELD_NUMBER: _ClassVar[int]
    ON_MISS_FIELD_NUMBER: _ClassVar[int]
    DURATION_HINT_S_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    DEPS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    content_type: str
    kind: str
    pool: str
    priority: Priority
    key: str
    deadline_in_s: float
    deadline_unix_ns: int
    start_in_s: float
    start_unix_ns: int
    tolerance_s: float
    on_miss: MissPolicy
    duration_hint_s: float
    timeout_s: float
    retry: RetryPolicy
    deps: _containers.RepeatedCompositeFieldContainer[Dep]
    resources: _containers.ScalarMap[str, int]
    tags: _containers.ScalarMap[str, str]
    labels: _containers.ScalarMap[str, str]
    tenant: str
    def __init__(self, payload: _Optional[bytes] = ..., content_type: _Optional[str] = ..., kind: _Optional[str] = ..., pool: _Optional[str] = ..., priority: _Optional[_Union[Priority, str]] = ..., key: _Optional[str] = ..., deadline_in_s: _Optional[float] = ..., deadline_unix_ns: _Optional[int] = ..., start_in_s: _Optional[float] = ..., start_unix_ns: _Optional[int] = ..., tolerance_s: _Optional[float] = ..., on_miss: _Optional[_Union[MissPolicy, str]] = ..., duration_hint_s: _Optional[float] = ..., timeout_s: _Optional[float] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., deps: _Optional[_Iterable[_Union[Dep, _Mapping]]] = ..., resources: _Optional[_Mapping[str, int]] = ..., tags: _Optional[_Mapping[str, str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., tenant: _Optional[str] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ("task", "wait", "wait_timeout_s")
    TASK_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    task: TaskSpec
    wait: bool
    wait_timeout_s: float
    def __init__(self, task: _Optional[_Union[TaskSpec, _Mapping]] = ..., wait: _Optional[bool] = ..., wait_timeout_s: _Optional[float] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("id", "duplicate", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: int
    duplicate: bool
    result: TaskResult
    def __init__(self, id: _Optional[int] = ..., duplicate: _Optional[bool] = ..., result: _Optional[_Union[TaskResult, _Mapping]] = ...) -> None: ...

class SubmitManyRequest(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ...) -> None: ...

class SubmitItemError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class SubmitItemResult(_message.Message):
    __slots__ = ("submitted", "error")
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    submitted: SubmitResponse
    error: SubmitItemError
    def __init__(self, submitted: _Optional[_Union[SubmitResponse, _Mapping]] = ..., error: _Optional[_Union[SubmitItemError, _Mapping]] = ...) -> None: ...

class SubmitManyResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SubmitItemResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SubmitItemResult, _Mapping]]] = ...) -> None: ...

class SubmitBatchRequest(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ...) -> None: ...

class SubmitBatchResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[SubmitResponse]
    def __init__(self, tasks: _Optional[_Iterable[_Union[SubmitResponse, _Mapping]]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: TaskRef
    def __init__(self, task: _Optional[_Union[TaskRef, _Mapping]] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("task", "include_payload")
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    task: TaskRef
    include_payload: bool
    def __init__(self, task: _Optional[_Union[TaskRef, _Mapping]] = ..., include_payload: _Optional[bool] = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("id", "status", "pool", "key", "kind", "attempt", "max_attempts", "created_unix_ns", "started_unix_ns", "finished_unix_ns", "message", "output_available", "tenant", "priority", "replay_of", "replayed_by", "progress", "attempts", "parents", "children", "name", "tags", "waiting", "parent_statuses", "child_statuses", "arguments", "parent_outcomes", "payload", "payload_content_type")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ParentStatusesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ChildStatusesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    REPLAY_OF_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_BY_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    PARENT_STATUSES_FIELD_NUMBER: _ClassVar[int]
    CHILD_STATUSES_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    PARENT_OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    id: int
    status: TaskStatus
    pool: str
    key: str
    kind: str
    attempt: int
    max_attempts: int
    created_unix_ns: int
    started_unix_ns: int
    finished_unix_ns: int
    message: str
    output_available: bool
    tenant: str
    priority: Priority
    replay_of: int
    replayed_by: int
    progress: Progress
    attempts: _containers.RepeatedCompositeFieldContainer[AttemptInfo]
    parents: _containers.RepeatedScalarFieldContainer[int]
    children: _containers.RepeatedScalarFieldContainer[int]
    name: str
    tags: _containers.ScalarMap[str, str]
    waiting: str
    parent_statuses: _containers.ScalarMap[str, int]
    child_statuses: _containers.ScalarMap[str, int]
    arguments: _containers.RepeatedCompositeFieldContainer[ArgumentSource]
    parent_outcomes: _containers.RepeatedCompositeFieldContainer[ParentInfo]
    payload: bytes
    payload_content_type: str
    def __init__(self, id: _Optional[int] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., pool: _Optional[str] = ..., key: _Optional[str] = ..., kind: _Optional[str] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., created_unix_ns: _Optional[int] = ..., started_unix_ns: _Optional[int] = ..., finished_unix_ns: _Optional[int] = ..., message: _Optional[str] = ..., output_available: _Optional[bool] = ..., tenant: _Optional[str] = ..., priority: _Optional[_Union[Priority, str]] = ..., replay_of: _Optional[int] = ..., replayed_by: _Optional[int] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[AttemptInfo, _Mapping]]] = ..., parents: _Optional[_Iterable[int]] = ..., children: _Optional[_Iterable[int]] = ..., name: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., waiting: _Optional[str] = ..., parent_statuses: _Optional[_Mapping[str, int]] = ..., child_statuses: _Optional[_Mapping[str, int]] = ..., arguments: _Optional[_Iterable[_Union[ArgumentSource, _Mapping]]] = ..., parent_outcomes: _Optional[_Iterable[_Union[ParentInfo, _Mapping]]] = ..., payload: _Optional[bytes] = ..., payload_content_type: _Optional[str] = ...) -> None: ...

class ParentInfo(_message.Message):
    __slots__ = ("id", "key", "status", "message", "output_available")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    id: int
    key: str
    status: str
    message: str
    output_available: bool
    def __init__(self, id: _Optional[int] = ..., key: _Optional[str] = ..., status: _Optional[str] = ..., message: _Optional[str] = ..., output_available: _Optional[bool] = ...) -> None: ...

class ArgumentSource(_message.Message):
    __slots__ = ("path", "mode", "edge", "task_id")
    PATH_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    EDGE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    mode: str
    edge: int
    task_id: int
    def __init__(self, path: _Optional[str] = ..., mode: _Optional[str] = ..., edge: _Optional[int] = ..., task_id: _Optional[int] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("pools", "statuses", "after", "limit", "kinds", "tags", "created_after_unix_ns", "created_before_unix_ns")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POOLS_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedScalarFieldContainer[str]
    statuses: _containers.RepeatedScalarFieldContainer[TaskStatus]
    after: int
    limit: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.ScalarMap[str, str]
    created_after_unix_ns: int
    created_before_unix_ns: int
    def __init__(self, pools: _Optional[_Iterable[str]] = ..., statuses: _Optional[_Iterable[_Union[TaskStatus, str]]] = ..., after: _Optional[int] = ..., limit: _Optional[int] = ..., kinds: _Optional[_Iterable[str]] = ..., tags: _Optional[_Mapping[str, str]] = ..., created_after_unix_ns: _Optional[int] = ..., created_before_unix_ns: _Optional[int] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_after", "unavailable_shards")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    next_after: int
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., next_after: _Optional[int] = ..., unavailable_shards: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskResult(_message.Message):
    __slots__ = ("id", "status", "output", "message", "output_available")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    id: int
    status: TaskStatus
    output: bytes
    message: str
    output_available: bool
    def __init__(self, id: _Optional[int] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., output: _Optional[bytes] = ..., message: _Optional[str] = ..., output_available: _Optional[bool] = ...) -> None: ...

class WaitRequest(_message.Message):
    __slots__ = ("task", "timeout_s")
    TASK_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    task: TaskRef
    timeout_s: float
    def __init__(self, task: _Optional[_Union[TaskRef, _Mapping]] = ..., timeout_s: _Optional[float] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("pools", "ids", "keys", "all_transitions", "progress")
    POOLS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    ALL_TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedScalarFieldContainer[str]
    ids: _containers.RepeatedScalarFieldContainer[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    all_transitions: bool
    progress: bool
    def __init__(self, pools: _Optional[_Iterable[str]] = ..., ids: _Optional[_Iterable[int]] = ..., keys: _Optional[_Iterable[str]] = ..., all_transitions: _Optional[bool] = ..., progress: _Optional[bool] = ...) -> None: ...

class StatusEvent(_message.Message):
    __slots__ = ("id", "pool", "key", "status", "attempt", "at_unix_ns", "message", "progress")
    ID_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    AT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    id: int
    pool: str
    key: str
    status: TaskStatus
    attempt: int
    at_unix_ns: int
    message: str
    progress: ProgressUpdate
    def __init__(self, id: _Optional[int] = ..., pool: _Optional[str] = ..., key: _Optional[str] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., attempt: _Optional[int] = ..., at_unix_ns: _Optional[int] = ..., message: _Optional[str] = ..., progress: _Optional[_Union[ProgressUpdate, _Mapping]] = ...) -> None: ...

class Register(_message.Message):
    __slots__ = ("pool", "slots", "worker_name", "protocol_version", "labels", "kinds")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POOL_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    WORKER_NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    pool: str
    slots: int
    worker_name: str
    protocol_version: int
    labels: _containers.ScalarMap[str, str]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, pool: _Optional[str] = ..., slots: _Optional[int] = ..., worker_name: _Optional[str] = ..., protocol_version: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., kinds: _Optional[_Iterable[str]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    def __init__(self, lease: _Optional[int] = ...) -> None: ...

class Complete(_message.Message):
    __slots__ = ("lease", "output", "content_type")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    output: bytes
    content_type: str
    def __init__(self, lease: _Optional[int] = ..., output: _Optional[bytes] = ..., content_type: _Optional[str] = ...) -> None: ...

class Fail(_message.Message):
    __slots__ = ("lease", "message", "permanent", "retry_after_s")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_S_FIELD_NUMBER: _ClassVar[int]
    lease: int
    message: str
    permanent: bool
    retry_after_s: float
    def __init__(self, lease: _Optional[int] = ..., message: _Optional[str] = ..., permanent: _Optional[bool] = ..., retry_after_s: _Optional[float] = ...) -> None: ...

class SetSlots(_message.Message):
    __slots__ = ("slots",)
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    slots: int
    def __init__(self, slots: _Optional[int] = ...) -> None: ...

class Nack(_message.Message):
    __slots__ = ("lease", "reason")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    lease: int
    reason: str
    def __init__(self, lease: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Cancelled(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    def __init__(self, lease: _Optional[int] = ...) -> None: ...

class WorkerMessage(_message.Message):
    __slots__ = ("register", "heartbeat", "complete", "fail", "set_slots", "nack", "cancelled", "batch", "progress", "durable")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    SET_SLOTS_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    register: Register
    heartbeat: Heartbeat
    complete: Complete
    fail: Fail
    set_slots: SetSlots
    nack: Nack
    cancelled: Cancelled
    batch: WorkerBatch
    progress: ProgressReport
    durable: DurableCall
    def __init__(self, register: _Optional[_Union[Register, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., complete: _Optional[_Union[Complete, _Mapping]] = ..., fail: _Optional[_Union[Fail, _Mapping]] = ..., set_slots: _Optional[_Union[SetSlots, _Mapping]] = ..., nack: _Optional[_Union[Nack, _Mapping]] = ..., cancelled: _Optional[_Union[Cancelled, _Mapping]] = ..., batch: _Optional[_Union[WorkerBatch, _Mapping]] = ..., progress: _Optional[_Union[ProgressReport, _Mapping]] = ..., durable: _Optional[_Union[DurableCall, _Mapping]] = ...) -> None: ...

class WorkerBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[WorkerMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[WorkerMessage, _Mapping]]] = ...) -> None: ...

class Registered(_message.Message):
    __slots__ = ("worker_id", "lease_ttl_s", "slots", "protocol_version", "max_message_bytes")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_S_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    worker_id: int
    lease_ttl_s: float
    slots: int
    protocol_version: int
    max_message_bytes: int
    def __init__(self, worker_id: _Optional[int] = ..., lease_ttl_s: _Optional[float] = ..., slots: _Optional[int] = ..., protocol_version: _Optional[int] = ..., max_message_bytes: _Optional[int] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("lease", "task_id", "attempt", "payload", "content_type", "kind", "key", "tags", "timeout_s", "deadline_unix_ns", "pool", "priority", "lease_ttl_s", "parents", "resumes", "journal_json")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LEASE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_S_FIELD_NUMBER: _ClassVar[int]
    PARENTS_FIELD_NUMBER: _ClassVar[int]
    RESUMES_FIELD_NUMBER: _ClassVar[int]
    JOURNAL_JSON_FIELD_NUMBER: _ClassVar[int]
    lease: int
    task_id: int
    attempt: int
    payload: bytes
    content_type: str
    kind: str
    key: str
    tags: _containers.ScalarMap[str, str]
    timeout_s: float
    deadline_unix_ns: int
    pool: str
    priority: Priority
    lease_ttl_s: float
    parents: _containers.RepeatedCompositeFieldContainer[ParentOutcome]
    resumes: int
    journal_json: str
    def __init__(self, lease: _Optional[int] = ..., task_id: _Optional[int] = ..., attempt: _Optional[int] = ..., payload: _Optional[bytes] = ..., content_type: _Optional[str] = ..., kind: _Optional[str] = ..., key: _Optional[str] = ..., tags: _Optional[_Mapping[str, str]] = ..., timeout_s: _Optional[float] = ..., deadline_unix_ns: _Optional[int] = ..., pool: _Optional[str] = ..., priority: _Optional[_Union[Priority, str]] = ..., lease_ttl_s: _Optional[float] = ..., parents: _Optional[_Iterable[_Union[ParentOutcome, _Mapping]]] = ..., resumes: _Optional[int] = ..., journal_json: _Optional[str] = ...) -> None: ...

class ParentOutcome(_message.Message):
    __slots__ = ("id", "key", "status", "output", "content_type", "has_output", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    HAS_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: int
    key: str
    status: str
    output: bytes
    content_type: str
    has_output: bool
    message: str
    def __init__(self, id: _Optional[int] = ..., key: _Optional[str] = ..., status: _Optional[str] = ..., output: _Optional[bytes] = ..., content_type: _Optional[str] = ..., has_output: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class DurableCall(_message.Message):
    __slots__ = ("lease", "call", "op", "args_json", "specs", "replayed")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    SPECS_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    lease: int
    call: int
    op: str
    args_json: str
    specs: _containers.RepeatedCompositeFieldContainer[TaskSpec]
    replayed: int
    def __init__(self, lease: _Optional[int] = ..., call: _Optional[int] = ..., op: _Optional[str] = ..., args_json: _Optional[str] = ..., specs: _Optional[_Iterable[_Union[TaskSpec, _Mapping]]] = ..., replayed: _Optional[int] = ...) -> None: ...

class DurableReply(_message.Message):
    __slots__ = ("call", "parked", "result_json", "outcomes", "error", "error_kind", "cursor")
    CALL_FIELD_NUMBER: _ClassVar[int]
    PARKED_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    call: int
    parked: bool
    result_json: str
    outcomes: _containers.RepeatedCompositeFieldContainer[ParentOutcome]
    error: str
    error_kind: str
    cursor: int
    def __init__(self, call: _Optional[int] = ..., parked: _Optional[bool] = ..., result_json: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[ParentOutcome, _Mapping]]] = ..., error: _Optional[str] = ..., error_kind: _Optional[str] = ..., cursor: _Optional[int] = ...) -> None: ...

class Abort(_message.Message):
    __slots__ = ("lease", "reason")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    lease: int
    reason: str
    def __init__(self, lease: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ("reason", "not_leader")
    REASON_FIELD_NUMBER: _ClassVar[int]
    NOT_LEADER_FIELD_NUMBER: _ClassVar[int]
    reason: str
    not_leader: bool
    def __init__(self, reason: _Optional[str] = ..., not_leader: _Optional[bool] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ("registered", "lease", "abort", "shutdown", "batch", "durable")
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    registered: Registered
    lease: Lease
    abort: Abort
    shutdown: Shutdown
    batch: ServerBatch
    durable: DurableReply
    def __init__(self, registered: _Optional[_Union[Registered, _Mapping]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., abort: _Optional[_Union[Abort, _Mapping]] = ..., shutdown: _Optional[_Union[Shutdown, _Mapping]] = ..., batch: _Optional[_Union[ServerBatch, _Mapping]] = ..., durable: _Optional[_Union[DurableReply, _Mapping]] = ...) -> None: ...

class ServerBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ServerMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ServerMessage, _Mapping]]] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PoolSnapshot(_message.Message):
    __slots__ = ("name", "capacity", "busy", "held", "desired", "pending_by_class", "reservations", "dispatched", "succeeded", "failed", "priority_adherence", "fixed_start_hit_rate", "utilization", "schedule_efficiency", "wait_p50_s", "wait_p90_s", "wait_p99_s", "cost", "workers_connected", "groups", "paused", "ready")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    DESIRED_FIELD_NUMBER: _ClassVar[int]
    PENDING_BY_CLASS_FIELD_NUMBER: _ClassVar[int]
    RESERVATIONS_FIELD_NUMBER: _ClassVar[int]
    DISPATCHED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_ADHERENCE_FIELD_NUMBER: _ClassVar[int]
    FIXED_START_HIT_RATE_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    WAIT_P50_S_FIELD_NUMBER: _ClassVar[int]
    WAIT_P90_S_FIELD_NUMBER: _ClassVar[int]
    WAIT_P99_S_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    WORKERS_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    name: str
    capacity: int
    busy: int
    held: int
    desired: int
    pending_by_class: _containers.RepeatedScalarFieldContainer[int]
    reservations: int
    dispatched: int
    succeeded: int
    failed: int
    priority_adherence: float
    fixed_start_hit_rate: float
    utilization: float
    schedule_efficiency: float
    wait_p50_s: float
    wait_p90_s: float
    wait_p99_s: float
    cost: float
    workers_connected: int
    groups: _containers.RepeatedCompositeFieldContainer[WorkerGroup]
    paused: bool
    ready: int
    def __init__(self, name: _Optional[str] = ..., capacity: _Optional[int] = ..., busy: _Optional[int] = ..., held: _Optional[int] = ..., desired: _Optional[int] = ..., pending_by_class: _Optional[_Iterable[int]] = ..., reservations: _Optional[int] = ..., dispatched: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., priority_adherence: _Optional[float] = ..., fixed_start_hit_rate: _Optional[float] = ..., utilization: _Optional[float] = ..., schedule_efficiency: _Optional[float] = ..., wait_p50_s: _Optional[float] = ..., wait_p90_s: _Optional[float] = ..., wait_p99_s: _Optional[float] = ..., cost: _Optional[float] = ..., workers_connected: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[WorkerGroup, _Mapping]]] = ..., paused: _Optional[bool] = ..., ready: _Optional[int] = ...) -> None: ...

class ResourceUse(_message.Message):
    __slots__ = ("name", "kind", "capacity", "in_use", "waiting", "per_key", "keys")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    IN_USE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    PER_KEY_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    capacity: int
    in_use: int
    waiting: int
    per_key: bool
    keys: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., capacity: _Optional[int] = ..., in_use: _Optional[int] = ..., waiting: _Optional[int] = ..., per_key: _Optional[bool] = ..., keys: _Optional[int] = ...) -> None: ...

class WorkerGroup(_message.Message):
    __slots__ = ("labels", "capacity", "busy")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    capacity: int
    busy: int
    def __init__(self, labels: _Optional[_Mapping[str, str]] = ..., capacity: _Optional[int] = ..., busy: _Optional[int] = ...) -> None: ...

class Totals(_message.Message):
    __slots__ = ("submitted", "dispatched", "succeeded", "failed", "dead_lettered", "cancelled", "skipped", "missed", "shed", "retries", "timeouts", "lease_expiries", "stale_completions", "recurring_conflicts", "recurring_rejected", "recurring_invalid")
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    DISPATCHED_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    SHED_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRIES_FIELD_NUMBER: _ClassVar[int]
    STALE_COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    RECURRING_CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    RECURRING_REJECTED_FIELD_NUMBER: _ClassVar[int]
    RECURRING_INVALID_FIELD_NUMBER: _ClassVar[int]
    submitted: int
    dispatched: int
    succeeded: int
    failed: int
    dead_lettered: int
    cancelled: int
    skipped: int
    missed: int
    shed: int
    retries: int
    timeouts: int
    lease_expiries: int
    stale_completions: int
    recurring_conflicts: int
    recurring_rejected: int
    recurring_invalid: int
    def __init__(self, submitted: _Optional[int] = ..., dispatched: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., cancelled: _Optional[int] = ..., skipped: _Optional[int] = ..., missed: _Optional[int] = ..., shed: _Optional[int] = ..., retries: _Optional[int] = ..., timeouts: _Optional[int] = ..., lease_expiries: _Optional[int] = ..., stale_completions: _Optional[int] = ..., recurring_conflicts: _Optional[int] = ..., recurring_rejected: _Optional[int] = ..., recurring_invalid: _Optional[int] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("pools", "live_tasks", "running", "pending", "totals", "workers_connected", "unavailable_shards", "resources")
    POOLS_FIELD_NUMBER: _ClassVar[int]
    LIVE_TASKS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    TOTALS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[PoolSnapshot]
    live_tasks: int
    running: int
    pending: int
    totals: Totals
    workers_connected: int
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    resources: _containers.RepeatedCompositeFieldContainer[ResourceUse]
    def __init__(self, pools: _Optional[_Iterable[_Union[PoolSnapshot, _Mapping]]] = ..., live_tasks: _Optional[int] = ..., running: _Optional[int] = ..., pending: _Optional[int] = ..., totals: _Optional[_Union[Totals, _Mapping]] = ..., workers_connected: _Optional[int] = ..., unavailable_shards: _Optional[_Iterable[str]] = ..., resources: _Optional[_Iterable[_Union[ResourceUse, _Mapping]]] = ...) -> None: ...

class ResourceKeysRequest(_message.Message):
    __slots__ = ("resource", "top")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    resource: str
    top: int
    def __init__(self, resource: _Optional[str] = ..., top: _Optional[int] = ...) -> None: ...

class ResourceKeyInfo(_message.Message):
    __slots__ = ("key", "running", "waiting", "limit")
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    running: int
    waiting: int
    limit: int
    def __init__(self, key: _Optional[str] = ..., running: _Optional[int] = ..., waiting: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ResourceKeysResponse(_message.Message):
    __slots__ = ("resource", "keys")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    resource: str
    keys: _containers.RepeatedCompositeFieldContainer[ResourceKeyInfo]
    def __init__(self, resource: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[ResourceKeyInfo, _Mapping]]] = ...) -> None: ...

class RecurringRequest(_message.Message):
    __slots__ = ("name", "cron", "tz", "template", "overlap")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TZ_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    name: str
    cron: str
    tz: str
    template: TaskSpec
    overlap: Overlap
    def __init__(self, name: _Optional[str] = ..., cron: _Optional[str] = ..., tz: _Optional[str] = ..., template: _Optional[_Union[TaskSpec, _Mapping]] = ..., overlap: _Optional[_Union[Overlap, str]] = ...) -> None: ...

class RemoveRecurringRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RemoveRecurringResponse(_message.Message):
    __slots__ = ("removed", "unavailable_shards")
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, removed: _Optional[bool] = ..., unavailable_shards: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("id", "name", "pool", "labels", "slots", "busy", "connected_unix_ns", "kinds")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    pool: str
    labels: _containers.ScalarMap[str, str]
    slots: int
    busy: int
    connected_unix_ns: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., pool: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., slots: _Optional[int] = ..., busy: _Optional[int] = ..., connected_unix_ns: _Optional[int] = ..., kinds: _Optional[_Iterable[str]] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers", "unavailable_shards")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ..., unavailable_shards: _Optional[_Iterable[str]] = ...) -> None: ...

class RecurringInfo(_message.Message):
    __slots__ = ("name", "cron", "tz", "pool", "kind", "overlap", "next_unix_ns", "last_task_id", "paused", "skipped_paused")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TZ_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    NEXT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    LAST_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_PAUSED_FIELD_NUMBER: _ClassVar[int]
    name: str
    cron: str
    tz: str
    pool: str
    kind: str
    overlap: Overlap
    next_unix_ns: int
    last_task_id: int
    paused: bool
    skipped_paused: int
    def __init__(self, name: _Optional[str] = ..., cron: _Optional[str] = ..., tz: _Optional[str] = ..., pool: _Optional[str] = ..., kind: _Optional[str] = ..., overlap: _Optional[_Union[Overlap, str]] = ..., next_unix_ns: _Optional[int] = ..., last_task_id: _Optional[int] = ..., paused: _Optional[bool] = ..., skipped_paused: _Optional[int] = ...) -> None: ...

class ListRecurringResponse(_message.Message):
    __slots__ = ("schedules", "unavailable_shards")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[RecurringInfo]
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, schedules: _Optional[_Iterable[_Union[RecurringInfo, _Mapping]]] = ..., unavailable_shards: _Optional[_Iterable[str]] = ...) -> None: ...

class PoolRequest(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: str
    def __init__(self, pool: _Optional[str] = ...) -> None: ...

class RecurringNameRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SignalRequest(_message.Message):
    __slots__ = ("name", "payload_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    payload_json: str
    def __init__(self, name: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class SignalResponse(_message.Message):
    __slots__ = ("duplicate", "unavailable_shards")
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, duplicate: _Optional[bool] = ..., unavailable_shards: _Optional[_Iterable[str]] = ...) -> None: ...

class PauseResponse(_message.Message):
    __slots__ = ("changed",)
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    changed: bool
    def __init__(self, changed: _Optional[bool] = ...) -> None: ...

class ReplayRequest(_message.Message):
    __slots__ = ("task", "force")
    TASK_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    task: TaskRef
    force: bool
    def __init__(self, task: _Optional[_Union[TaskRef, _Mapping]] = ..., force: _Optional[bool] = ...) -> None: ...

class TaskFilter(_message.Message):
    __slots__ = ("pools", "statuses", "kinds", "tags", "tenant", "created_after_unix_ns", "created_before_unix_ns", "finished_after_unix_ns", "finished_before_unix_ns", "limit")
    class TagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    POOLS_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AFTER_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_BEFORE_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedScalarFieldContainer[str]
    statuses: _containers.RepeatedScalarFieldContainer[TaskStatus]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    tags: _containers.ScalarMap[str, str]
    tenant: str
    created_after_unix_ns: int
    created_before_unix_ns: int
    finished_after_unix_ns: int
    finished_before_unix_ns: int
    limit: int
    def __init__(self, pools: _Optional[_Iterable[str]] = ..., statuses: _Optional[_Iterable[_Union[TaskStatus, str]]] = ..., kinds: _Optional[_Iterable[str]] = ..., tags: _Optional[_Mapping[str, str]] = ..., tenant: _Optional[str] = ..., created_after_unix_ns: _Optional[int] = ..., created_before_unix_ns: _Optional[int] = ..., finished_after_unix_ns: _Optional[int] = ..., finished_before_unix_ns: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class BulkRequest(_message.Message):
    __slots__ = ("filter", "request_key", "force")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_KEY_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    filter: TaskFilter
    request_key: str
    force: bool
    def __init__(self, filter: _Optional[_Union[TaskFilter, _Mapping]] = ..., request_key: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class BulkResponse(_message.Message):
    __slots__ = ("matched", "acted", "unavailable_shards", "resumed")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    ACTED_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    matched: int
    acted: int
    unavailable_shards: _containers.RepeatedScalarFieldContainer[str]
    resumed: bool
    def __init__(self, matched: _Optional[int] = ..., acted: _Optional[int] = ..., unavailable_shards: _Optional[_Iterable[str]] = ..., resumed: _Optional[bool] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("done", "total", "message", "at_unix_ns", "attempt")
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AT_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    done: float
    total: float
    message: str
    at_unix_ns: int
    attempt: int
    def __init__(self, done: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ..., at_unix_ns: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class AttemptInfo(_message.Message):
    __slots__ = ("number", "started_unix_ns", "ended_unix_ns", "worker", "outcome", "message")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    STARTED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    ENDED_UNIX_NS_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    number: int
    started_unix_ns: int
    ended_unix_ns: int
    worker: str
    outcome: str
    message: str
    def __init__(self, number: _Optional[int] = ..., started_unix_ns: _Optional[int] = ..., ended_unix_ns: _Optional[int] = ..., worker: _Optional[str] = ..., outcome: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ProgressUpdate(_message.Message):
    __slots__ = ("done", "total", "message")
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    done: float
    total: float
    message: str
    def __init__(self, done: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class ProgressReport(_message.Message):
    __slots__ = ("lease", "done", "total", "message")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    lease: int
    done: float
    total: float
    message: str
    def __init__(self, lease: _Optional[int] = ..., done: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...
