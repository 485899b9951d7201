package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

//go:embed templates/*.html static/*
var assets embed.FS

// ContentSecurityPolicy is sent with every response: nothing but the
// viewer's own stylesheet and images is loaded, no script runs, no form is
// posted anywhere, and no other site may frame the pages.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Errors the handlers map to HTTP statuses.
var (
	// ErrBadDigest reports a path that does not hold a full sha256 digest.
	ErrBadDigest = errors.New("not a full sha256 digest")
	// ErrBadQuery reports a query parameter that does not parse.
	ErrBadQuery = errors.New("bad query parameter")
	// ErrWrongKind reports a digest that names an artifact of another kind
	// than the page shows.
	ErrWrongKind = errors.New("artifact of another kind")
)

// TrustedKey is a public key whose signatures count, and the file it was read
// from (named in the replay command the evidence page prints).
type TrustedKey struct {
	Path string
	Key  *bundle.PublicKey
}

// Frontier is what the frontier page folds: the runs of an optimizer
// competition in the order they became final, the bar at launch and the
// rules (see [scoring.FoldFrontier] and [scoring.SplitEmission]). With Round
// set, the runs and the baseline are read at every request from the round's
// verdicts signed by the viewer's trusted keys ([consensus.RunsFromVerdicts],
// as 'feval frontier --round' reads them), so that the page follows the
// verdicts as validators publish them; Runs and BaselineMicroNats are then
// unused.
type Frontier struct {
	BaselineMicroNats int64
	Runs              []scoring.Run
	Rules             scoring.Rules
	// Round is an optimizer round; Launch the competition's launch, which
	// run times count from.
	Round  digest.Digest
	Launch time.Time
}

// Options configure a Server. The zero value serves a local store with no
// trusted key, no registry and no frontier.
type Options struct {
	// Source, when set, is a registry repository: artifacts and rounds not
	// in the local store are gathered from it into the local store when a
	// page asks for them.
	Source cas.Store
	// SourceName is Source's address as a user types it (for --from in the
	// replay command).
	SourceName string
	// Trusted are the keys whose signatures count.
	Trusted []TrustedKey
	// Frontier, when set, is shown on the frontier page.
	Frontier *Frontier
	// Refresh, when positive, makes the rounds, leaderboard and frontier
	// pages reload themselves at this interval (a meta refresh: no script),
	// so that they follow the verdicts validators publish; serving from a
	// registry, every load gathers from it anew.
	Refresh time.Duration
	// Now is the clock that decides whether a round's windows are open; nil
	// is time.Now. It is never written into anything.
	Now func() time.Time
}

// Server serves the pages of one local store. It is an http.Handler, safe for
// concurrent use. It reopens the store when the store's index changes, so
// what other processes add appears without a restart.
type Server struct {
	root  string
	opts  Options
	mux   *http.ServeMux
	pages map[string]*template.Template

	mu    sync.Mutex
	l     *cas.Layout
	stamp indexStamp
}

type indexStamp struct {
	mod  time.Time
	size int64
}

// New opens the store at root and returns a Server over it.
func New(root string, opts Options) (*Server, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{root: root, opts: opts, mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	if _, err := s.store(); err != nil {
		return nil, err
	}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(assets, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/rounds", http.StatusFound)
	})
	s.route("/rounds", "rounds", s.roundsPage)
	s.route("/rounds/{round}", "board", s.boardPage)
	s.route("/verdicts/{verdict}", "evidence", s.evidencePage)
	s.route("/verdicts/{verdict}/replay", "replay", s.replayPage)
	s.route("/verdicts/{verdict}/scenarios/{scenario}", "exchanges", s.exchangesPage)
	s.route("/frontier", "frontier", s.frontierPage)
	s.route("/artifacts/{digest}", "artifact", s.artifactPage)
	s.mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, false, fmt.Errorf("no page at %s: %w", r.URL.Path, cas.ErrNotFound))
	})
	return s, nil
}

// builder computes one page's data. The title names the page.
type builder func(ctx context.Context, l *cas.Layout, r *http.Request) (title string, data any, err error)

// route serves a page as HTML at path and as JSON at /api + path.
func (s *Server) route(path, tmpl string, b builder) {
	s.mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, tmpl, b, false) })
	s.mux.HandleFunc("GET /api"+path, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, tmpl, b, true) })
}

// view is what every HTML page template receives.
type view struct {
	Title string
	JSON  string // the page's JSON path
	Data  any
	// Refresh is how often the page reloads itself, in seconds (0: never).
	Refresh int
}

// refreshed are the pages that reload themselves to follow new verdicts.
var refreshed = map[string]bool{"rounds": true, "board": true, "frontier": true}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, tmpl string, b builder, asJSON bool) {
	l, err := s.store()
	if err != nil {
		s.fail(w, r, asJSON, err)
		return
	}
	title, data, err := b(r.Context(), l, r)
	if err != nil {
		s.fail(w, r, asJSON, err)
		return
	}
	if asJSON {
		writeJSON(w, http.StatusOK, data)
		return
	}
	jsonPath := "/api" + r.URL.Path
	if r.URL.RawQuery != "" {
		jsonPath += "?" + r.URL.RawQuery
	}
	v := view{Title: title, JSON: jsonPath, Data: data}
	if refreshed[tmpl] && s.opts.Refresh > 0 {
		v.Refresh = max(int(s.opts.Refresh/time.Second), 1)
	}
	s.writeHTML(w, http.StatusOK, tmpl, v)
}

// ServeHTTP implements http.Handler, adding the safety headers to every
// response.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	h.Set("Cache-Control", "no-cache")
	s.mux.ServeHTTP(w, r)
}

// LoopbackOnly wraps h so that it answers only requests whose Host header
// names a loopback address or localhost: a page of another site that
// resolves its own name to 127.0.0.1 (DNS rebinding) gets 421 and nothing
// else.
func LoopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopbackHost(r.Host) {
			http.Error(w, "this viewer answers only to a loopback address or localhost", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopbackHost reports whether hostport ("host" or "host:port") names
// localhost or a loopback IP address.
func IsLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// store returns the layout, reopened when its index changed on disk.
func (s *Server) store() (*cas.Layout, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(filepath.Join(s.root, "index.json"))
	var st indexStamp
	if err == nil {
		st = indexStamp{fi.ModTime(), fi.Size()}
	}
	if s.l != nil && st == s.stamp {
		return s.l, nil
	}
	l, err := cas.OpenLayout(s.root)
	if err != nil {
		return nil, err
	}
	s.l, s.stamp = l, st
	return l, nil
}

// resolve finds a manifest by full digest in the local store, gathering it
// (with its subjects and referrers) from the source registry when the local
// store lacks it.
func (s *Server) resolve(ctx context.Context, l *cas.Layout, d digest.Digest) (ocispec.Descriptor, error) {
	desc, err := l.Resolve(ctx, d.String())
	if err == nil || !errors.Is(err, cas.ErrNotFound) || s.opts.Source == nil {
		return desc, err
	}
	desc, err = s.opts.Source.Resolve(ctx, d.String())
	if err != nil {
		return desc, err
	}
	if _, err := cas.Copy(ctx, s.opts.Source, l, desc, cas.CopyOptions{Subjects: true, Referrers: true, Siblings: true}); err != nil {
		return desc, fmt.Errorf("gathering %s from %s: %w", d, s.opts.SourceName, err)
	}
	if err := l.Flush(); err != nil {
		return desc, err
	}
	return l.Resolve(ctx, d.String())
}

// pathDigest reads a full sha256 digest from a path segment.
func pathDigest(r *http.Request, name string) (digest.Digest, error) {
	v := r.PathValue(name)
	d, err := digest.Parse(v)
	if err != nil || d.Algorithm() != digest.SHA256 {
		return "", fmt.Errorf("%q: %w", v, ErrBadDigest)
	}
	return d, nil
}

// queryDigest reads an optional full digest from a query parameter.
func queryDigest(r *http.Request, name string) (digest.Digest, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return "", nil
	}
	d, err := digest.Parse(v)
	if err != nil || d.Algorithm() != digest.SHA256 {
		return "", fmt.Errorf("%s=%q: %w (want a full sha256 digest)", name, v, ErrBadQuery)
	}
	return d, nil
}

// errorData is the body of an error response.
type errorData struct {
	Status int    `json:"status"`
	Error  string `json:"error"`
}

func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrBadDigest), errors.Is(err, ErrBadQuery):
		return http.StatusBadRequest
	case errors.Is(err, cas.ErrNotFound), errors.Is(err, ErrWrongKind), errors.Is(err, bundle.ErrNotArtifact):
		return http.StatusNotFound
	case errors.Is(err, protocol.ErrMalformed):
		return http.StatusUnprocessableEntity
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, asJSON bool, err error) {
	code := statusOf(err)
	e := errorData{Status: code, Error: err.Error()}
	if asJSON || strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, e)
		return
	}
	s.writeHTML(w, code, "error", view{Title: http.StatusText(code), Data: e})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

func (s *Server) writeHTML(w http.ResponseWriter, code int, name string, v view) {
	var buf strings.Builder
	if err := s.pages[name].ExecuteTemplate(&buf, "base", v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Internal error</title><p>rendering the page failed</p>")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(buf.String()))
}

func (s *Server) parseTemplates() error {
	for _, name := range []string{"rounds", "board", "evidence", "replay", "exchanges", "frontier", "artifact", "error"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/base.html", "templates/charts.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}
