package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/troupe-hpc/troupe/internal/auth"
)

// Output is how the page follows a job's output: GET
// /v1/jobs/{id}/output?host=main1 runs `bpeek -f` as the session's user
// (their uid, gid and groups) against schedd's unix socket, and streams
// what it prints. The output file lives on the shared file system, where
// that user, not schedd, decides who reads it: bpeek reads it as the
// user would, so the page shows nothing the user could not read on the
// host. schedd must run as root to run it as another user.
type Output struct {
	Bpeek string // the bpeek binary; "" the page cannot follow output
	Addr  string // TROUPE_ADDR for it: schedd's socket, unix://PATH
}

// maxOutputStderr bounds what is kept of bpeek's complaints.
const maxOutputStderr = 4 << 10

func (p *page) output(w http.ResponseWriter, r *http.Request, s *session, id auth.Identity) {
	job, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/jobs/"), "/output"), 10, 64)
	switch {
	case r.Method != http.MethodGet:
		w.Header().Set("Allow", "GET")
		httpError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: GET it", r.Method, r.URL.Path))
		return
	case err != nil || job == 0:
		httpError(w, http.StatusNotFound, fmt.Errorf("%s: not a job's output (/v1/jobs/ID/output)", r.URL.Path))
		return
	case s == nil:
		httpError(w, http.StatusUnauthorized, fmt.Errorf("%s: log in first: a job's output is for its owner", r.URL.Path))
		return
	case p.out.Bpeek == "":
		httpError(w, http.StatusNotImplemented, errors.New("this schedd cannot follow output: bpeek is not installed next to it; run bpeek -f"))
		return
	}
	host := r.URL.Query().Get("host")
	if host == "" {
		host = "main1"
	}
	cmd := exec.CommandContext(r.Context(), p.out.Bpeek, "-f", "--host", host, strconv.FormatUint(job, 10))
	cmd.Env = []string{"TROUPE_ADDR=" + p.out.Addr, "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.Dir = "/"
	if cred, err := credential(id); err != nil {
		httpError(w, http.StatusForbidden, err)
		return
	} else if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitWriter{w: &stderr, n: maxOutputStderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		httpError(w, http.StatusInternalServerError, err)
		return
	}
	if err := cmd.Start(); err != nil {
		httpError(w, http.StatusInternalServerError, fmt.Errorf("running bpeek as %s: %v", id.User, err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				break
			}
			_ = rc.Flush()
		}
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil && r.Context().Err() == nil {
		// The page shows this line at the end of the output.
		fmt.Fprintf(w, "\n[%s]\n", strings.TrimSpace(stderr.String()+" "+err.Error()))
	}
}

// credential is who bpeek runs as: the session's user with their groups;
// nil when that is schedd's own user already.
func credential(id auth.Identity) (*syscall.Credential, error) {
	if id.UID < 0 || id.GID < 0 {
		return nil, fmt.Errorf("%s has no uid on this machine", id.User)
	}
	if id.UID == os.Geteuid() && id.GID == os.Getegid() {
		return nil, nil
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("schedd runs as uid %d, not root: it cannot read output as %s (uid %d); run bpeek -f", os.Geteuid(), id.User, id.UID)
	}
	cred := &syscall.Credential{Uid: uint32(id.UID), Gid: uint32(id.GID), Groups: []uint32{}}
	if u, err := user.LookupId(strconv.Itoa(id.UID)); err == nil {
		if gs, err := u.GroupIds(); err == nil {
			for _, g := range gs {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil {
					cred.Groups = append(cred.Groups, uint32(n))
				}
			}
		}
	}
	return cred, nil
}

// limitWriter keeps the first n bytes written to it.
type limitWriter struct {
	w io.Writer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if k := min(len(p), l.n); k > 0 {
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
