package convert

import (
	"reflect"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/structs"
)

// TestNodePoolRoundTrip: every field of a pool survives structs -> api ->
// structs, indexes aside (a write does not carry them).
func TestNodePoolRoundTrip(t *testing.T) {
	in := &structs.NodePool{Name: "gpu", Description: "d", Meta: map[string]string{"a": "b"},
		Scaling: &structs.PoolScalingPolicy{Provider: "exec", ProviderConfig: map[string]string{"command": "/x"}, Min: 1, Max: 3,
			Shape:    structs.NodeShape{NodeClass: "a100", GPUModel: "m", GPUCount: 2, GPUMemoryMB: 1024, MemoryModel: "unified", Availability: "opportunistic"},
			Cooldown: time.Second, IdleAfter: time.Minute, Idle: structs.PoolIdleRule{NoAllocations: true, GPUUtilBelowPercent: 7, GPUUtilFor: time.Hour}},
		CreateIndex: 4, ModifyIndex: 9}
	out := NodePoolFromStructs(in)
	if out.CreateIndex != 4 || out.ModifyIndex != 9 {
		t.Fatalf("indexes = %d %d", out.CreateIndex, out.ModifyIndex)
	}
	back := NodePoolToStructs(out)
	want := in.Copy()
	want.CreateIndex, want.ModifyIndex = 0, 0
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip:\ngot  %+v %+v\nwant %+v %+v", back, back.Scaling, want, want.Scaling)
	}
	if NodePoolFromStructs(nil) != nil || NodePoolToStructs(nil) != nil {
		t.Fatal("nil pool converted to non-nil")
	}
}
