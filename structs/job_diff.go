package structs

import (
	"encoding/json"
	"fmt"
	"sort"
)

// diffIgnored are job fields the server sets; they are not part of a
// change a user makes.
var diffIgnored = map[string]bool{
	"Status": true, "StatusDescription": true, "Version": true, "SubmitTime": true,
	"CreateIndex": true, "ModifyIndex": true, "JobModifyIndex": true, "Stop": true, "Stable": true,
}

// JobDiff lists what changes from old to cur, one line per leaf value:
// "+ path = value" for an added value, "- path = value" for a removed one,
// "~ path: old => new" for a changed one, sorted by path. Groups and tasks
// are named, not numbered: `TaskGroups["workers"].Tasks["train"].Driver`.
// Fields the server sets (status, version, indexes, submit time) are left
// out. A nil old (a new job) lists everything as added.
func JobDiff(old, cur *Job) []string {
	a, b := flattenJob(old), flattenJob(cur)
	var out []string
	for _, k := range unionKeys(a, b) {
		va, ina := a[k]
		vb, inb := b[k]
		switch {
		case ina && !inb:
			out = append(out, fmt.Sprintf("- %s = %s", k, va))
		case !ina && inb:
			out = append(out, fmt.Sprintf("+ %s = %s", k, vb))
		case va != vb:
			out = append(out, fmt.Sprintf("~ %s: %s => %s", k, va, vb))
		}
	}
	return out
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys(a, b map[string]string) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	return sorted
}

// flattenJob turns a job into path → JSON value for every leaf.
func flattenJob(j *Job) map[string]string {
	out := map[string]string{}
	if j == nil {
		return out
	}
	raw, err := json.Marshal(j)
	if err != nil {
		return out
	}
	var v map[string]interface{}
	if err := json.Unmarshal(raw, &v); err != nil {
		return out
	}
	for k, x := range v {
		if !diffIgnored[k] {
			flatten(k, x, out)
		}
	}
	return out
}

// flatten adds the leaves of v under path. Lists of objects with a "Name"
// are keyed by it; other lists by position.
func flatten(path string, v interface{}, out map[string]string) {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, c := range x {
			flatten(path+"."+k, c, out)
		}
	case []interface{}:
		for i, c := range x {
			key := fmt.Sprintf("%s[%d]", path, i)
			if m, ok := c.(map[string]interface{}); ok {
				if name, ok := m["Name"].(string); ok && name != "" {
					key = fmt.Sprintf("%s[%q]", path, name)
				}
			}
			flatten(key, c, out)
		}
	case nil:
	default:
		b, _ := json.Marshal(x)
		out[path] = string(b)
	}
}
