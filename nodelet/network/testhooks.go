package network

import "sync/atomic"

// The package's tests hold the network's work at two points: before a
// session's links are made, and before each deletion the reaper runs in
// the background. Production never sets these, and no Manager carries
// them: a test sets one and clears it when it ends; the hook is given
// the Manager (or reaper) it runs for, so that a test holds its own.
var (
	// testHookCreate runs before a session's links are made; an error
	// it returns fails the session as the kernel would.
	testHookCreate atomic.Pointer[func(*Manager) error]
	// testHookReap runs before each deletion the reaper takes from its
	// queue.
	testHookReap atomic.Pointer[func(*reaper)]
)
