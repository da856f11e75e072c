package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"
)

// DefaultPort is where sessions' sshd listens (Backend.AI's too).
const DefaultPort = 2200

func server(args []string) int {
	fs := flag.NewFlagSet("troupe-ssh server", flag.ContinueOnError)
	port := fs.Int("p", DefaultPort, "TCP port")
	dir := fs.String("keys", filepath.Join(home(), ".ssh"), "directory with id_cluster and authorized_keys")
	listenFD := fs.Int("listen-fd", -1, "accept on this inherited listening socket instead of listening on -p")
	connFD := fs.Int("conn-fd", -1, "serve this inherited connection first (troupe-init's socket activation)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := serverConfig(*dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-ssh server: %v\n", err)
		return 1
	}
	ln, err := serverListener(*listenFD, *port)
	if err != nil {
		fmt.Fprintf(os.Stderr, "troupe-ssh server: %v\n", err)
		return 1
	}
	if *connFD >= 0 {
		f := os.NewFile(uintptr(*connFD), "connection")
		conn, err := net.FileConn(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "troupe-ssh server: --conn-fd %d: %v\n", *connFD, err)
			return 1
		}
		go serveConn(conn, cfg)
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return 0
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serveConn(conn, cfg)
	}
}

// serverListener is the inherited listening socket fd, or a new one on
// port when fd is negative.
func serverListener(fd, port int) (net.Listener, error) {
	if fd < 0 {
		return net.Listen("tcp", ":"+strconv.Itoa(port))
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("--listen-fd %d: %w", fd, err)
	}
	return ln, nil
}

// serverConfig: the host key is id_cluster, clients must hold a key of
// authorized_keys.
func serverConfig(dir string) (*ssh.ServerConfig, error) {
	pemBytes, err := os.ReadFile(filepath.Join(dir, "id_cluster"))
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("id_cluster: %w", err)
	}
	authorized, err := readAuthorized(filepath.Join(dir, "authorized_keys"))
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			for _, k := range authorized {
				if bytes.Equal(k.Marshal(), key.Marshal()) {
					return &ssh.Permissions{}, nil
				}
			}
			return nil, errors.New("key not authorized")
		},
	}
	cfg.AddHostKey(signer)
	return cfg, nil
}

func readAuthorized(path string) ([]ssh.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []ssh.PublicKey
	for len(bytes.TrimSpace(b)) > 0 {
		k, _, _, rest, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			break
		}
		keys = append(keys, k)
		b = rest
	}
	return keys, nil
}

func serveConn(conn net.Conn, cfg *ssh.ServerConfig) {
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // handshake only
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s := &sshSession{ch: ch, remote: sc.RemoteAddr(), local: sc.LocalAddr()}
		go s.serve(creqs)
	}
}

// sshSession is one session channel: env, an optional pty, then one
// shell or exec.
type sshSession struct {
	ch            ssh.Channel
	remote, local net.Addr

	mu      sync.Mutex
	env     []string
	pty     *ptyRequest
	ptmx    *os.File
	cmd     *exec.Cmd
	started bool
}

type ptyRequest struct {
	Term          string
	Cols, Rows    uint32
	Width, Height uint32
	Modes         string
}

func (s *sshSession) serve(reqs <-chan *ssh.Request) {
	for req := range reqs {
		ok := s.handle(req)
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
	// The client closed the channel: end what still runs.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGHUP)
	}
}

func (s *sshSession) handle(req *ssh.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req.Type {
	case "env":
		var kv struct{ Name, Value string }
		if ssh.Unmarshal(req.Payload, &kv) != nil || kv.Name == "" {
			return false
		}
		s.env = append(s.env, kv.Name+"="+kv.Value)
		return true
	case "pty-req":
		var p ptyRequest
		if ssh.Unmarshal(req.Payload, &p) != nil {
			return false
		}
		s.pty = &p
		return true
	case "window-change":
		var w struct{ Cols, Rows, Width, Height uint32 }
		if ssh.Unmarshal(req.Payload, &w) != nil || s.ptmx == nil {
			return false
		}
		_ = pty.Setsize(s.ptmx, &pty.Winsize{Cols: uint16(w.Cols), Rows: uint16(w.Rows)})
		return true
	case "signal":
		var sig struct{ Signal string }
		if ssh.Unmarshal(req.Payload, &sig) != nil || s.cmd == nil || s.cmd.Process == nil {
			return false
		}
		n, ok := signals[sig.Signal]
		if ok {
			_ = syscall.Kill(-s.cmd.Process.Pid, n)
		}
		return ok
	case "shell", "exec":
		if s.started {
			return false
		}
		var command string
		if req.Type == "exec" {
			var e struct{ Command string }
			if ssh.Unmarshal(req.Payload, &e) != nil {
				return false
			}
			command = e.Command
		}
		if err := s.start(req.Type == "shell", command); err != nil {
			fmt.Fprintf(s.ch.Stderr(), "troupe-ssh: %v\r\n", err)
			return false
		}
		s.started = true
		return true
	}
	return false
}

// start runs the user's shell, interactive or with -c command. s.mu is
// held.
func (s *sshSession) start(shell bool, command string) error {
	sh := os.Getenv("SHELL")
	if sh == "" {
		sh = "/bin/sh"
	}
	args := []string{sh}
	if !shell {
		args = append(args, "-c", command)
	}
	cmd := exec.Command(sh, args[1:]...)
	cmd.Env = append(os.Environ(),
		"SSH_CLIENT="+hostPort(s.remote)+" "+portOf(s.local),
		"SSH_CONNECTION="+hostPort(s.remote)+" "+hostPort(s.local))
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Dir = home()
	if _, err := os.Stat(cmd.Dir); err != nil {
		cmd.Dir = "/"
	}
	s.cmd = cmd
	if s.pty != nil {
		if s.pty.Term != "" {
			cmd.Env = append(cmd.Env, "TERM="+s.pty.Term)
		}
		ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(s.pty.Cols), Rows: uint16(s.pty.Rows)})
		if err != nil {
			return err
		}
		s.ptmx = ptmx
		go s.runPty(cmd, ptmx)
		return nil
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdout, cmd.Stderr = s.ch, s.ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _, _ = io.Copy(stdin, s.ch); stdin.Close() }()
	go func() { s.exit(cmd.Wait()) }()
	return nil
}

func (s *sshSession) runPty(cmd *exec.Cmd, ptmx *os.File) {
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(s.ch, ptmx); close(copied) }()
	go func() { _, _ = io.Copy(ptmx, s.ch) }()
	err := cmd.Wait()
	select { // the last output, unless a background job holds the pty
	case <-copied:
	case <-time.After(200 * time.Millisecond):
	}
	ptmx.Close()
	s.exit(err)
}

// exit reports how the command ended and closes the channel.
func (s *sshSession) exit(err error) {
	status := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			name := signalName(ws.Signal())
			_, _ = s.ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}{name, ws.CoreDump(), "", ""}))
			_ = s.ch.CloseWrite()
			s.ch.Close()
			return
		}
		status = ee.ExitCode()
	} else if err != nil {
		status = 255
	}
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
	_ = s.ch.CloseWrite()
	s.ch.Close()
}

// signals are the SSH signal names (RFC 4254 6.10) and their numbers.
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

func signalName(sig syscall.Signal) string {
	for k, v := range signals {
		if v == sig {
			return k
		}
	}
	return "KILL"
}

func hostPort(a net.Addr) string {
	h, p, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return h + " " + p
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}
