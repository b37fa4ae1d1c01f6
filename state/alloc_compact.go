package state

import (
	"sort"
	"strings"
	"sync"
	"unique"
	"unsafe"

	"github.com/gpulayer/gpulayer/structs"
)

// The state keeps every allocation until GC, most of them finished: at
// 100,000 allocations each byte an allocation keeps is 100 KB of the
// server's heap, doubled by the GC's headroom. The functions here make a
// stored allocation share what it has in common with others (strings of
// its job, node and evaluation, its task events' types and details)
// instead of holding its own copy decoded from its Raft entry. Stored
// objects are never mutated, so sharing is safe.

// maxInternLen bounds the strings interned: longer ones are rarely
// repeated (messages with a path or an error in them) and keep their own
// copy.
const maxInternLen = 128

// intern returns s's canonical copy, shared by every interned string equal
// to it (unique.Make; unused ones are collected), or s itself when it is
// empty or longer than maxInternLen.
func intern(s string) string {
	if s == "" || len(s) > maxInternLen {
		return s
	}
	return unique.Make(s).Value()
}

// compactPlacedAlloc interns, in place, the fields of a the state's own
// copy of a placement shares with the allocations of its job, node and
// evaluation: namespace, job, task group, evaluation, node and
// deployment, the statuses, its task names and device identities. Each
// allocation's own ID, name and device instance IDs are left alone.
func compactPlacedAlloc(a *structs.Allocation) {
	if a.Job != nil && a.JobID == a.Job.ID {
		a.JobID = a.Job.ID
	} else {
		a.JobID = intern(a.JobID)
	}
	a.Namespace = intern(a.Namespace)
	a.EvalID = intern(a.EvalID)
	a.NodeID = intern(a.NodeID)
	a.NodeName = intern(a.NodeName)
	a.TaskGroup = intern(a.TaskGroup)
	a.DeploymentID = intern(a.DeploymentID)
	a.DesiredStatus = intern(a.DesiredStatus)
	a.DesiredDescription = intern(a.DesiredDescription)
	a.ClientStatus = intern(a.ClientStatus)
	a.ClientDescription = intern(a.ClientDescription)
	if a.AllocatedResources == nil {
		return
	}
	tasks := a.AllocatedResources.Tasks
	var rekey []string
	for name, tr := range tasks {
		if tr != nil {
			for _, d := range tr.Devices {
				if d != nil {
					d.Vendor, d.Type, d.Name = intern(d.Vendor), intern(d.Type), intern(d.Name)
				}
			}
		}
		// The interned copy always equals name by content: whether the
		// key is that copy is a question of its bytes.
		if in := intern(name); unsafe.StringData(in) != unsafe.StringData(name) {
			rekey = append(rekey, in)
		}
	}
	for _, in := range rekey {
		// Same key: the map keeps the canonical string instead.
		tr := tasks[in]
		delete(tasks, in)
		tasks[in] = tr
	}
}

// storedTaskStates is a deep copy of a client's task states for the state
// to keep: names, states, event types and messages interned, each task's
// events in one array, and small Details maps shared with every equal one
// (sharedDetails). Nil states and events stay nil. It panics on nothing:
// it only reads what it copies.
func storedTaskStates(in map[string]*structs.TaskState) map[string]*structs.TaskState {
	if in == nil {
		return nil
	}
	out := make(map[string]*structs.TaskState, len(in))
	for name, ts := range in {
		if ts == nil {
			out[intern(name)] = nil
			continue
		}
		n := *ts
		n.State = intern(ts.State)
		if ts.Events != nil {
			events := make([]structs.TaskEvent, len(ts.Events))
			n.Events = make([]*structs.TaskEvent, len(ts.Events))
			for i, e := range ts.Events {
				if e == nil {
					continue
				}
				c := &events[i]
				*c = *e
				c.Type = intern(e.Type)
				c.Message = intern(e.Message)
				c.DisplayMessage = intern(e.DisplayMessage)
				c.Details = sharedDetails(e.Details)
				n.Events[i] = c
			}
		}
		out[intern(name)] = &n
	}
	return out
}

// Shared Details maps: a task event's details are a few short pairs
// ("exit_code": "0"), the same for most of a fleet's allocations, and a
// small Go map costs about 300 bytes. detailsCacheMax bounds the cache (it
// starts over when full), detailsMaxPairs and maxInternLen the maps it
// takes.
const (
	detailsCacheMax = 4096
	detailsMaxPairs = 4
)

var detailsCache struct {
	sync.Mutex
	m map[string]map[string]string
}

// sharedDetails returns a map equal to d: one shared with every equal map
// given before when d is small (at most detailsMaxPairs pairs of strings
// of at most maxInternLen bytes), a copy of d otherwise, nil for nil and an
// empty map for an empty one. The caller must never change the result.
func sharedDetails(d map[string]string) map[string]string {
	if d == nil {
		return nil
	}
	if len(d) == 0 || len(d) > detailsMaxPairs {
		return cloneDetails(d)
	}
	keys := make([]string, 0, len(d))
	for k, v := range d {
		if len(k) > maxInternLen || len(v) > maxInternLen {
			return cloneDetails(d)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		// NUL cannot be confused with content: lengths prefix each part.
		sb.WriteString(string(rune(len(k))))
		sb.WriteString(k)
		sb.WriteString(string(rune(len(d[k]))))
		sb.WriteString(d[k])
	}
	key := sb.String()
	detailsCache.Lock()
	defer detailsCache.Unlock()
	if m, ok := detailsCache.m[key]; ok {
		return m
	}
	if detailsCache.m == nil || len(detailsCache.m) >= detailsCacheMax {
		detailsCache.m = make(map[string]map[string]string)
	}
	m := cloneDetails(d)
	detailsCache.m[key] = m
	return m
}

// cloneDetails copies d with its strings interned.
func cloneDetails(d map[string]string) map[string]string {
	m := make(map[string]string, len(d))
	for k, v := range d {
		m[intern(k)] = intern(v)
	}
	return m
}
