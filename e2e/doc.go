// Package e2e runs whole troupe clusters on this machine: the real
// binaries (schedd --dev with nodelets, bsub, bqueue, bjob, bkill) and
// real runc containers. The tests need root and runc; without them they
// skip, saying so.
package e2e
