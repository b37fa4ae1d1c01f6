package api

// UnsupportedFields is THE list of Nomad request fields GPUlayer knows and
// does not implement (issue 12: "nothing silently dropped"). CheckFields
// consults it for every JSON key of a job request that has no field in
// this package's wire types:
//
//   - Refuse: a non-zero value is refused with a 400 naming the field and
//     Reason. A zero value (null, false, 0, "", [], {} or an object of
//     zero values) is what Nomad's client sends for a block the user left
//     out, and is accepted.
//   - Warn: the value is accepted and ignored, with a warning in the
//     response's Warnings naming the field and Reason.
//   - Ignore: accepted and ignored without a word (request metadata such
//     as Nomad's Submission, or read-only fields a client echoes back).
//
// A key that is neither a wire-type field nor listed here is unknown: a
// non-zero value gets a warning, never an error.
//
// WHEN A FEATURE LANDS: add its field to the wire type (and convert), then
// DELETE its entry here; TestUnsupportedFieldsAreNotWireFields fails while
// both exist. Owners of the pending entries are named in Reason.
//
// Owner is the type name of the JSON object the key sits in ("Job",
// "TaskGroup", "Task", "Resources", "TaskArtifact", "RestartPolicy",
// "JobRegisterRequest"); Field is the JSON key, matched without regard to
// case as encoding/json matches keys.
var UnsupportedFields = []UnsupportedField{
	// Deployments and versions: the update block is supported; version
	// tags are not.
	{Owner: "Job", Field: "VersionTag", Kind: Refuse, Reason: "job version tags are not supported"},
	{Owner: "UpdateStrategy", Field: "Stagger", Kind: Ignore, Reason: "stagger has no effect: a replacement waits for the health of the one before"},

	// Networks: a task's resources network block (deprecated in Nomad);
	// ports go in the group's network block.
	{Owner: "Resources", Field: "Networks", Kind: Refuse, Reason: "a network block in task resources is not supported; put it in the group"},

	// Nomad features GPUlayer has no plan for; refused so a job never
	// runs without what it asked for.
	{Owner: "Job", Field: "AllAtOnce", Kind: Refuse, Reason: "all_at_once is not supported"},
	{Owner: "Job", Field: "Multiregion", Kind: Refuse, Reason: "GPUlayer has one region"},
	{Owner: "Job", Field: "Spreads", Kind: Refuse, Reason: "spread blocks are not supported; use affinities"},
	{Owner: "Job", Field: "Reschedule", Kind: Refuse, Reason: "set reschedule in each group"},
	{Owner: "Job", Field: "Migrate", Kind: Refuse, Reason: "the migrate block is not supported (drains stop and replace)"},
	{Owner: "Job", Field: "ConsulToken", Kind: Refuse, Reason: "GPUlayer has no Consul integration"},
	{Owner: "Job", Field: "ConsulNamespace", Kind: Refuse, Reason: "GPUlayer has no Consul integration"},
	{Owner: "Job", Field: "VaultToken", Kind: Refuse, Reason: "GPUlayer has no Vault integration"},
	{Owner: "Job", Field: "VaultNamespace", Kind: Refuse, Reason: "GPUlayer has no Vault integration"},
	{Owner: "TaskGroup", Field: "Spreads", Kind: Refuse, Reason: "spread blocks are not supported; use affinities"},
	{Owner: "TaskGroup", Field: "Volumes", Kind: Refuse, Reason: "volumes are not supported; use artifacts"},
	{Owner: "TaskGroup", Field: "Disconnect", Kind: Refuse, Reason: "the disconnect block is not supported"},
	{Owner: "TaskGroup", Field: "Migrate", Kind: Refuse, Reason: "the migrate block is not supported (drains stop and replace)"},
	{Owner: "TaskGroup", Field: "StopAfterClientDisconnect", Kind: Refuse, Reason: "stop_after_client_disconnect is not supported"},
	{Owner: "TaskGroup", Field: "MaxClientDisconnect", Kind: Refuse, Reason: "max_client_disconnect is not supported"},
	{Owner: "TaskGroup", Field: "Scaling", Kind: Refuse, Reason: "scaling policies are not supported"},
	{Owner: "TaskGroup", Field: "Consul", Kind: Refuse, Reason: "GPUlayer has no Consul integration"},
	{Owner: "TaskGroup", Field: "PreventRescheduleOnLost", Kind: Refuse, Reason: "prevent_reschedule_on_lost is not supported"},
	{Owner: "Task", Field: "Lifecycle", Kind: Refuse, Reason: "task lifecycle hooks (prestart, sidecar) are not supported"},
	{Owner: "Task", Field: "RestartPolicy", Kind: Refuse, Reason: "set restart in the group"},
	{Owner: "Task", Field: "Vault", Kind: Refuse, Reason: "GPUlayer has no Vault integration"},
	{Owner: "Task", Field: "Consul", Kind: Refuse, Reason: "GPUlayer has no Consul integration"},
	{Owner: "Task", Field: "Templates", Kind: Refuse, Reason: "template blocks are not supported"},
	{Owner: "Task", Field: "VolumeMounts", Kind: Refuse, Reason: "volumes are not supported; use artifacts"},
	{Owner: "Task", Field: "CSIPluginConfig", Kind: Refuse, Reason: "CSI plugins are not supported"},
	{Owner: "Task", Field: "Leader", Kind: Refuse, Reason: "leader tasks are not supported"},
	{Owner: "Task", Field: "Kind", Kind: Refuse, Reason: "Consul Connect task kinds are not supported"},
	{Owner: "Task", Field: "ScalingPolicies", Kind: Refuse, Reason: "scaling policies are not supported"},
	{Owner: "Task", Field: "Secrets", Kind: Refuse, Reason: "secret blocks are not supported"},
	{Owner: "Task", Field: "Identity", Kind: Refuse, Reason: "workload identities are not supported"},
	{Owner: "Task", Field: "Identities", Kind: Refuse, Reason: "workload identities are not supported"},
	{Owner: "Task", Field: "Actions", Kind: Refuse, Reason: "task actions are not supported; use alloc exec"},
	{Owner: "Task", Field: "Schedule", Kind: Refuse, Reason: "task schedules are not supported"},
	{Owner: "Resources", Field: "Cores", Kind: Refuse, Reason: "reserved cores are not supported; ask for cpu in MHz"},
	{Owner: "Resources", Field: "MemoryMaxMB", Kind: Refuse, Reason: "memory oversubscription (memory_max) is not supported"},
	{Owner: "Resources", Field: "NUMA", Kind: Refuse, Reason: "NUMA-aware scheduling is not supported"},
	{Owner: "Resources", Field: "SecretsMB", Kind: Refuse, Reason: "secret blocks are not supported"},
	{Owner: "TaskArtifact", Field: "GetterHeaders", Kind: Refuse, Reason: "artifact headers are not supported"},
	{Owner: "TaskArtifact", Field: "GetterInsecure", Kind: Refuse, Reason: "insecure artifact downloads are not supported"},
	{Owner: "TaskArtifact", Field: "Chown", Kind: Refuse, Reason: "artifact chown is not supported"},
	{Owner: "RestartPolicy", Field: "RenderTemplates", Kind: Refuse, Reason: "template blocks are not supported"},
	{Owner: "JobRegisterRequest", Field: "EnforceIndex", Kind: Refuse, Reason: "check-and-set registration (-check-index) is not supported"},
	{Owner: "JobRegisterRequest", Field: "JobModifyIndex", Kind: Refuse, Reason: "check-and-set registration (-check-index) is not supported"},
	{Owner: "JobRegisterRequest", Field: "PolicyOverride", Kind: Refuse, Reason: "GPUlayer has no Sentinel policies"},
	{Owner: "JobRegisterRequest", Field: "PreserveCounts", Kind: Refuse, Reason: "preserving counts is not supported"},
	{Owner: "JobRegisterRequest", Field: "PreserveResources", Kind: Refuse, Reason: "preserving resources is not supported"},
	{Owner: "JobRegisterRequest", Field: "EvalPriority", Kind: Refuse, Reason: "evaluation priorities are not supported; set the job's priority"},

	// Accepted and ignored, with a warning: the job runs as it would
	// without them, and the caller is told.
	{Owner: "TaskGroup", Field: "EphemeralDisk", Kind: Warn, Reason: "GPUlayer does not reserve disk; the block is ignored"},
	{Owner: "Task", Field: "LogConfig", Kind: Warn, Reason: "log rotation is the client's (client.logs); the block is ignored"},
	{Owner: "Resources", Field: "DiskMB", Kind: Warn, Reason: "GPUlayer does not reserve disk; disk is ignored"},
	{Owner: "Resources", Field: "IOPS", Kind: Warn, Reason: "iops is deprecated in Nomad and ignored"},
	{Owner: "Job", Field: "UI", Kind: Warn, Reason: "the job's UI block is ignored"},

	// Accepted and ignored silently: request metadata and read-only
	// fields a client sends back as it read them.
	{Owner: "Job", Field: "NomadTokenID", Kind: Ignore},
	{Owner: "JobRegisterRequest", Field: "Submission", Kind: Ignore},
	{Owner: "JobRegisterRequest", Field: "Region", Kind: Ignore},
	{Owner: "JobRegisterRequest", Field: "Namespace", Kind: Ignore},
	{Owner: "JobRegisterRequest", Field: "SecretID", Kind: Ignore},
	{Owner: "JobRegisterRequest", Field: "IdempotencyToken", Kind: Ignore},
	// Plan requests: the diff is always computed.
	{Owner: "JobRegisterRequest", Field: "Diff", Kind: Ignore},
}

// UnsupportedKind says what CheckFields does with an UnsupportedFields
// entry: Refuse a non-zero value, Warn and ignore it, or Ignore it.
type UnsupportedKind int

// The kinds of UnsupportedFields entries.
const (
	Refuse UnsupportedKind = iota
	Warn
	Ignore
)

// UnsupportedField is one entry of UnsupportedFields.
type UnsupportedField struct {
	Owner, Field string
	Kind         UnsupportedKind
	Reason       string
}
