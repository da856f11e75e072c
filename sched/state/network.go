package state

import (
	"fmt"
)

// Session networks come from 10.64.0.0/10, one /24 per session, and VNIs
// from [vniBase, vniBase+networkSlots). Both follow from the job id, so
// every replica allocates the same ones with no shared counter. Two live
// sessions collide only if their ids are networkSlots apart, which the
// queue would have to hold 16,384 sessions at once to reach.
const (
	networkSlots = 1 << 14
	vniBase      = 4096
)

// MaxSessionSize is how many containers a /24 session network holds
// (.1 is the gateway/bridge, .255 broadcast): jobspec.MaxClusterSize,
// which submission refuses a larger job by, with the setting's place in
// the job file. Apply keeps the check for entries logged before
// submission knew the bound: it refused those, and a replay must too.
const MaxSessionSize = 253

// sessionNetwork gives job id its network and each container its address
// (.2 upward, in rank order).
func sessionNetwork(j *Job) {
	slot := uint32((j.ID - 1) % networkSlots)
	// 10.64.0.0/10 holds 2^14 /24s: second octet 64..127, third 0..255.
	b, c := 64+slot>>8, slot&0xff
	j.Network = &Network{VNI: vniBase + slot, Subnet: fmt.Sprintf("10.%d.%d.0/24", b, c)}
	for i := range j.Containers {
		j.Containers[i].Addr = fmt.Sprintf("10.%d.%d.%d", b, c, i+2)
	}
}
