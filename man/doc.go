// Package man holds troupe's manual pages, written by hand in roff with
// the man macros (not mdoc):
//
//	bsub.1 bqueue.1 bkill.1 bjob.1 bhosts.1   the user commands
//	troupe-ssh.1                              ssh inside containers
//	troupe-job.5                              the job file
//	schedd.8 nodelet.8                        the daemons
//
// Read one in place with `man ./man/bsub.1`. The package has no code; its
// tests keep the pages honest:
//
//   - every page renders with `groff -man -ww` without a single warning
//     (groff comes from Debian's groff-base package; without groff the
//     test skips, unless TROUPE_REQUIRE_GROFF=1, as CI sets, makes that a
//     failure);
//   - every binary under ../cmd has a page (troupe-init, which only runs
//     inside containers, is exempt), and every page of a section 1 or 8
//     names a binary that exists;
//   - the OPTIONS of each command's page list exactly the flags its
//     main package defines (read from the Go source), no more, no less
//     (troupe-ssh's client parses OpenSSH's command line by hand: the
//     letters its parser switches on count, see handParsed);
//   - the job files marked `.\" check: hcl` (or json) in troupe-job.5
//     parse without a diagnostic, and the variables its INSIDE EVERY
//     CONTAINER section lists are the ones nodelet/session sets for a
//     runc container on a session network with ssh.
//
// Pages are ASCII: groff 1.22 reads its input as Latin-1, so write
// \(em, \(mu, \(-> and friends instead of UTF-8.
package man
