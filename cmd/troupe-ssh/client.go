package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// options is what the client takes from its command line and
// ~/.ssh/config; the first value obtained wins, as in OpenSSH.
type options struct {
	host, hostName, user string
	port                 int
	identities           []string
	sendEnv              []string // patterns
	setEnv               []string // NAME=VALUE
	connectTimeout       time.Duration
	tty                  int // -1 -T, 0 auto, 1 -t
	noStdin, quiet       bool
	command              []string
}

// flagsWithArg are OpenSSH's options that take an argument.
const flagsWithArg = "BbcDEeFIiJLlmOopQRSWw"

func client(args []string) int {
	o, err := parseClientArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ssh: %v\n", err)
		return 255
	}
	readConfig(&o, filepath.Join(home(), ".ssh", "config"))
	code, err := runClient(o)
	if err != nil {
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "ssh: %v\n", err)
		}
		return 255
	}
	return code
}

func parseClientArgs(args []string) (options, error) {
	o := options{}
	cfgOpts := []string{}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if len(a) < 2 || a[0] != '-' {
			break
		}
		for j := 1; j < len(a); j++ {
			f := a[j]
			if strings.IndexByte(flagsWithArg, f) >= 0 {
				val := a[j+1:]
				if val == "" {
					i++
					if i >= len(args) {
						return o, fmt.Errorf("option -%c needs an argument", f)
					}
					val = args[i]
				}
				switch f {
				case 'p':
					p, err := strconv.Atoi(val)
					if err != nil {
						return o, fmt.Errorf("bad port %q", val)
					}
					o.port = p
				case 'l':
					o.user = val
				case 'i':
					o.identities = append(o.identities, val)
				case 'o':
					cfgOpts = append(cfgOpts, val)
				}
				break
			}
			switch f {
			case 't':
				o.tty = 1
			case 'T':
				o.tty = -1
			case 'n':
				o.noStdin = true
			case 'q':
				o.quiet = true
			}
		}
	}
	if i >= len(args) {
		return o, errors.New("usage: ssh [options] destination [command [argument ...]]")
	}
	dest := args[i]
	if u, h, ok := strings.Cut(dest, "@"); ok {
		if o.user == "" {
			o.user = u
		}
		dest = h
	}
	o.host, o.command = dest, args[i+1:]
	for _, kv := range cfgOpts {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			k, v, _ = strings.Cut(kv, " ")
		}
		setOption(&o, k, strings.TrimSpace(v))
	}
	return o, nil
}

// setOption applies one ssh_config keyword unless already set.
func setOption(o *options, key, val string) {
	switch strings.ToLower(key) {
	case "port":
		if p, err := strconv.Atoi(val); err == nil && o.port == 0 {
			o.port = p
		}
	case "user":
		if o.user == "" {
			o.user = val
		}
	case "hostname":
		if o.hostName == "" {
			o.hostName = val
		}
	case "identityfile":
		o.identities = append(o.identities, val)
	case "sendenv":
		o.sendEnv = append(o.sendEnv, strings.Fields(val)...)
	case "setenv":
		o.setEnv = append(o.setEnv, strings.Fields(val)...)
	case "connecttimeout":
		if s, err := strconv.Atoi(val); err == nil && o.connectTimeout == 0 {
			o.connectTimeout = time.Duration(s) * time.Second
		}
	}
}

// readConfig applies the Host blocks of an ssh_config that match o.host.
func readConfig(o *options, file string) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	match := true
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, _ := strings.Cut(strings.Replace(line, "=", " ", 1), " ")
		val = strings.TrimSpace(val)
		if strings.EqualFold(key, "Host") {
			match = hostMatches(o.host, strings.Fields(val))
			continue
		}
		if strings.EqualFold(key, "Match") {
			match = false
			continue
		}
		if match {
			setOption(o, key, val)
		}
	}
}

func hostMatches(host string, patterns []string) bool {
	ok := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if m, _ := path.Match(strings.TrimPrefix(p, "!"), host); m {
			if neg {
				return false
			}
			ok = true
		}
	}
	return ok
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home(), rest)
	}
	return p
}

// signers loads the identities that exist, then the defaults.
func (o *options) signers() []ssh.Signer {
	files := append(o.identities, "~/.ssh/id_cluster", "~/.ssh/id_ed25519", "~/.ssh/id_rsa")
	var out []ssh.Signer
	for _, f := range files {
		b, err := os.ReadFile(expandHome(f))
		if err != nil {
			continue
		}
		if s, err := ssh.ParsePrivateKey(b); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// dial connects, retrying while the peer's sshd is not up yet (a
// session's containers start together but not at the same instant).
func (o *options) dial() (*ssh.Client, error) {
	addr := o.host
	if o.hostName != "" {
		addr = o.hostName
	}
	port := o.port
	if port == 0 {
		port = DefaultPort
	}
	user := o.user
	if user == "" {
		user = os.Getenv("USER")
	}
	if user == "" {
		user = "work"
	}
	timeout := o.connectTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	cfg := &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(o.signers()...)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // sessions: StrictHostKeyChecking no
		Timeout:         timeout,
	}
	target := net.JoinHostPort(addr, strconv.Itoa(port))
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		c, err := ssh.Dial("tcp", target, cfg)
		if err == nil {
			return c, nil
		}
		if !retryable(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to host %s port %d: %w", addr, port, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func retryable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func runClient(o options) (int, error) {
	c, err := o.dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if hostMatches(k, o.sendEnv) {
			_ = sess.Setenv(k, kv[len(k)+1:])
		}
	}
	for _, kv := range o.setEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			_ = sess.Setenv(k, v)
		}
	}
	stdinTTY := isTerminal(0)
	wantPty := o.tty == 1 || (o.tty == 0 && len(o.command) == 0 && stdinTTY)
	if wantPty {
		restore, err := requestPty(sess, stdinTTY)
		if err != nil {
			return 0, err
		}
		defer restore()
	}
	sess.Stdout, sess.Stderr = os.Stdout, os.Stderr
	if !o.noStdin {
		in, err := sess.StdinPipe()
		if err != nil {
			return 0, err
		}
		go func() { _, _ = io.Copy(in, os.Stdin); in.Close() }()
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			_ = sess.Signal(ssh.Signal(signalName(s.(syscall.Signal))))
		}
	}()
	if len(o.command) > 0 {
		err = sess.Start(strings.Join(o.command, " "))
	} else {
		err = sess.Shell()
	}
	if err != nil {
		return 0, err
	}
	return exitCode(sess.Wait())
}

func exitCode(err error) (int, error) {
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if sig, ok := signals[ee.Signal()]; ok && ee.Signal() != "" {
			return 128 + int(sig), nil
		}
		return ee.ExitStatus(), nil
	case errors.As(err, &missing):
		return 255, nil
	}
	return 0, err
}

func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// requestPty asks for a pty the size of ours and puts our terminal in
// raw mode; restore undoes it.
func requestPty(sess *ssh.Session, local bool) (restore func(), err error) {
	term := os.Getenv("TERM")
	if term == "" {
		term = "xterm"
	}
	cols, rows := 80, 24
	if ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		cols, rows = int(ws.Col), int(ws.Row)
	}
	if err := sess.RequestPty(term, rows, cols, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
		return nil, err
	}
	if !local {
		return func() {}, nil
	}
	old, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return func() {}, nil
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	_ = unix.IoctlSetTermios(0, unix.TCSETS, &raw)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			if ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ); err == nil {
				_ = sess.WindowChange(int(ws.Row), int(ws.Col))
			}
		}
	}()
	return func() { signal.Stop(winch); _ = unix.IoctlSetTermios(0, unix.TCSETS, old) }, nil
}

// probe waits until every host's sshd runs `true`, then prints "ready".
func probe(hosts []string) int {
	errs := make(chan error, len(hosts))
	for _, h := range hosts {
		go func() {
			o := options{host: h}
			readConfig(&o, filepath.Join(home(), ".ssh", "config"))
			c, err := o.dial()
			if err == nil {
				var s *ssh.Session
				if s, err = c.NewSession(); err == nil {
					err = s.Run("true")
				}
				c.Close()
			}
			errs <- err
		}()
	}
	for range hosts {
		if err := <-errs; err != nil {
			fmt.Fprintf(os.Stderr, "troupe-ssh probe: %v\n", err)
			return 1
		}
	}
	fmt.Println("ready")
	return 0
}
