package main

import (
	"net/http"
	"strings"
)

// Cookies between the browser and the app. The browser sends the app's
// host name only the cookies set for that name: bapp's key and the
// app's own (Jupyter's _xsrf and login cookies, say), which the app
// needs back. bapp still takes out, whatever the browser sends, every
// cookie troupe names for itself: its keys (troupe-key-PORT) and the
// web page's session (troupe_session, __Host-troupe_session), so that
// neither reaches an app even through a browser that groups host names
// differently. The app's Set-Cookie headers go back to the browser
// without a Domain attribute, so each cookie the app sets belongs to its
// own host name alone, and without any that names one of troupe's
// cookies.

// ownCookie says whether name is one troupe uses itself: it starts with
// "troupe", after a __Host- or __Secure- prefix, in any case.
func ownCookie(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, p := range []string{"__host-", "__secure-"} {
		n = strings.TrimPrefix(n, p)
	}
	return strings.HasPrefix(n, "troupe")
}

// appCookies drops troupe's own cookies from h's Cookie headers, keeping
// the others byte for byte.
func appCookies(h http.Header) {
	var out []string
	for _, v := range h.Values("Cookie") {
		var keep []string
		for _, part := range strings.Split(v, ";") {
			part = strings.TrimSpace(part)
			if n, _, _ := strings.Cut(part, "="); part != "" && !ownCookie(n) {
				keep = append(keep, part)
			}
		}
		if len(keep) > 0 {
			out = append(out, strings.Join(keep, "; "))
		}
	}
	h.Del("Cookie")
	if len(out) > 0 {
		h["Cookie"] = out
	}
}

// appSetCookies rewrites the app's Set-Cookie headers in h: a cookie
// without a name (a browser would send its value as a name=value of
// its own) or with one of troupe's names is dropped; the others lose
// their Domain attributes, so that each applies to the app's host name
// only.
func appSetCookies(h http.Header) {
	var out []string
	for _, v := range h.Values("Set-Cookie") {
		parts := strings.Split(v, ";")
		n, _, ok := strings.Cut(parts[0], "=")
		if !ok || strings.TrimSpace(n) == "" || ownCookie(n) {
			continue
		}
		keep := []string{strings.TrimSpace(parts[0])}
		for _, a := range parts[1:] {
			an, _, _ := strings.Cut(a, "=")
			if a = strings.TrimSpace(a); a != "" && !strings.EqualFold(strings.TrimSpace(an), "domain") {
				keep = append(keep, a)
			}
		}
		out = append(out, strings.Join(keep, "; "))
	}
	h.Del("Set-Cookie")
	if len(out) > 0 {
		h["Set-Cookie"] = out
	}
}
