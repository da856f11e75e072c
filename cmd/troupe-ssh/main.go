// Command troupe-ssh is the SSH server and client of troupe sessions, one
// static binary (golang.org/x/crypto/ssh) that the nodelet mounts
// read-only into every container, so that `ssh sub1` and `mpirun` work in
// an image that has neither sshd nor ssh.
//
//	troupe-ssh server [-p 2200]        sshd: keys from ~/.ssh (id_cluster,
//	                                   authorized_keys); exec, shell with a
//	                                   pty, env, signals; -listen-fd N and
//	                                   -conn-fd N take troupe-init's
//	                                   listener and first connection
//	ssh [options] host [command...]    the client, when invoked as "ssh"
//	                                   (mounted at /.troupe/bin/ssh)
//	troupe-ssh ssh [options] host ...  the client, by name
//	troupe-ssh probe host...           wait until every host's sshd runs
//	                                   a command, print "ready"
//
// The server runs as the container's user and runs what clients ask as
// that user: it accepts any user name whose key is in authorized_keys.
// Its host key is the session key, so every container of a session
// presents the same one. The client reads the OpenSSH options and the
// ~/.ssh/config keywords a session needs (Port, User, HostName,
// IdentityFile, SendEnv, SetEnv, ConnectTimeout) and ignores the rest;
// host keys are not checked (sessions write StrictHostKeyChecking no).
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	os.Exit(dispatch(os.Args))
}

func dispatch(argv []string) int {
	if filepath.Base(argv[0]) == "ssh" {
		return client(argv[1:])
	}
	if len(argv) < 2 {
		return usage()
	}
	switch argv[1] {
	case "server", "sshd":
		return server(argv[2:])
	case "ssh", "client":
		return client(argv[2:])
	case "probe":
		return probe(argv[2:])
	}
	return usage()
}

func usage() int {
	fmt.Fprintln(os.Stderr, "usage: troupe-ssh server [-p PORT] [-keys DIR] [-listen-fd N [-conn-fd N]] | troupe-ssh ssh [options] HOST [COMMAND...] | troupe-ssh probe HOST...")
	return 2
}

// home is the user's home: $HOME, else /home/work.
func home() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	return "/home/work"
}
