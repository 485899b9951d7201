package cas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// Remote is a Store in one repository of an OCI registry.
//
// Referrers are discovered without any read-modify-write of a shared object, so
// that any number of parties may attach records to one subject at once:
//
//   - where the registry implements the OCI Referrers API (detected by asking it),
//     the registry indexes subjects itself;
//   - elsewhere every referrer is pushed under its own tag, ReferrerTag(subject,
//     referrer), and discovered by listing tags. A tag put is atomic and no two
//     records share a tag, so concurrent pushes never overwrite each other.
//
// Either way every candidate is fetched and kept only if its own subject field
// names the subject: a listing is a hint, never trusted.
type Remote struct {
	repo     *remote.Repository
	ref      registry.Reference
	deadline time.Time

	mu       sync.Mutex
	api      int8          // referrers API: 0 unknown, 1 supported, -1 unsupported
	probing  chan struct{} // closed when the probe in flight ends
	manifest map[digest.Digest][]byte
	cached   int64
	// Fallback index updates run in the background. A push of a subject
	// waits until the index lists the subject's new referrers (indexing, by
	// subject); settle and Close wait for the updates to end (background).
	indexing   map[digest.Digest]*pending
	background sync.WaitGroup
	// Referrer listings started ahead of a walk that will ask for them (see
	// withWalk), by subject; each is taken by the walk's Referrers call, and
	// dropped when this Remote pushes a referrer of the subject or the walk
	// ends.
	ahead map[digest.Digest]*listing
}

// listing is a referrer listing running in the background.
type listing struct {
	done chan struct{}
	refs []ocispec.Descriptor
	err  error
}

// maxAhead bounds the listings one listing starts ahead of the walk (a
// registry cannot make a walk ask for more than its candidates' listings).
const maxAhead = 16

// RemoteOptions configures access to a registry.
type RemoteOptions struct {
	// PlainHTTP forces plain HTTP. Loopback hosts use plain HTTP regardless.
	PlainHTTP bool
	// DockerConfig is the credentials file; empty means the Docker default.
	DockerConfig string
	// IdleTimeout bounds how long a connection may make no progress; zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Deadline, when set, ends every operation on the Remote that has not
	// finished by then.
	Deadline time.Time
}

// ParseRemote splits "host[:port]/repo[:tag|@digest]" into the repository and the
// tag or digest it names (empty if none).
func ParseRemote(s string) (registry.Reference, error) {
	ref, err := registry.ParseReference(s)
	if err != nil {
		return registry.Reference{}, fmt.Errorf("%q: %w: want host[:port]/repository[:tag|@digest]", s, ErrBadReference)
	}
	return ref, nil
}

// OpenRemote connects to the repository named by ref (any tag or digest in ref is
// ignored here). Credentials come from the Docker config as the docker and oras
// CLIs store them.
func OpenRemote(ref registry.Reference, opts RemoteOptions) (*Remote, error) {
	repo, err := remote.NewRepository(ref.Registry + "/" + ref.Repository)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReference, err)
	}
	repo.PlainHTTP = opts.PlainHTTP || isLoopback(ref.Host())
	creds, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if opts.DockerConfig != "" {
		creds, err = credentials.NewStore(opts.DockerConfig, credentials.StoreOptions{})
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	client := &auth.Client{
		// No retrying transport: Remote retries whole idempotent steps (see
		// retry), which also covers streamed uploads and failures mid-body, and
		// two layers of retries would multiply the time a dead registry takes.
		Client: &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           idleDialer(idle),
			TLSHandshakeTimeout:   idle,
			ResponseHeaderTimeout: 2 * idle,
			// Close pooled connections before their pending read times out.
			IdleConnTimeout:     idle / 2,
			MaxIdleConnsPerHost: 8,
			// Larger than the 4 KiB default (a million write calls for a
			// 4 GiB model), but allocated per connection, and a copy opens
			// several: 64 KiB. Reads into the copy's larger buffers bypass it.
			WriteBufferSize: connBuffer,
			ReadBufferSize:  connBuffer,
		}},
		Cache: auth.NewCache(),
	}
	if err == nil {
		client.Credential = credentials.Credential(creds)
	}
	repo.Client = client
	repo.SkipReferrersGC = true
	repo.MaxMetadataBytes = MaxManifestSize
	// feval discovers referrers itself (see Remote); telling oras-go the registry
	// indexes them keeps it from maintaining the read-modify-write fallback index.
	_ = repo.SetReferrersCapability(true)
	return &Remote{repo: repo, ref: ref, deadline: opts.Deadline, manifest: map[digest.Digest][]byte{},
		indexing: map[digest.Digest]*pending{}, ahead: map[digest.Digest]*listing{}}, nil
}

// connBuffer is the read and write buffer of each registry connection.
const connBuffer = 64 << 10

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Name returns "host/repository".
func (r *Remote) Name() string { return r.ref.Registry + "/" + r.ref.Repository }

// ctx applies the Remote's deadline.
func (r *Remote) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, r.deadline)
}

// maxCached bounds the manifests a Remote keeps in memory.
const maxCached = 64 << 20

func (r *Remote) cachedManifest(d digest.Digest) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.manifest[d]
	return b, ok
}

func (r *Remote) cacheManifest(d digest.Digest, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.manifest[d]; !ok && r.cached+int64(len(b)) <= maxCached {
		r.manifest[d] = b
		r.cached += int64(len(b))
	}
}

// Fetch implements Store. Manifests are read whole, with retries, and verified
// before Fetch returns; blobs stream and verify as they are read.
func (r *Remote) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if err := ValidateDescriptor(desc); err != nil {
		return nil, err
	}
	if IsManifest(desc.MediaType) {
		b, err := r.fetchManifest(ctx, desc)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	ctx, cancel := r.ctx(ctx)
	rc, err := r.repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		cancel()
		return nil, r.wrap(desc.Digest.String(), err)
	}
	vr, err := NewVerifyReader(&netReader{rc: rc, wrap: func(e error) error { return r.wrap(desc.Digest.String(), e) }}, desc)
	if err != nil {
		rc.Close()
		cancel()
		return nil, err
	}
	return &cancelReader{ReadCloser: vr, cancel: cancel}, nil
}

type cancelReader struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelReader) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func (c *cancelReader) verifies() ocispec.Descriptor {
	if v, ok := c.ReadCloser.(verifying); ok {
		return v.verifies()
	}
	return ocispec.Descriptor{}
}

// fetchManifest reads and verifies a manifest, retrying transient failures.
func (r *Remote) fetchManifest(ctx context.Context, desc ocispec.Descriptor) ([]byte, error) {
	if desc.Size > MaxManifestSize {
		return nil, fmt.Errorf("manifest %s is %d bytes: %w", desc.Digest, desc.Size, ErrTooLarge)
	}
	if b, ok := r.cachedManifest(desc.Digest); ok && int64(len(b)) == desc.Size {
		return b, nil
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	var b []byte
	err := retry(ctx, func() error {
		rc, err := r.repo.Manifests().Fetch(ctx, desc)
		if err != nil {
			return r.wrap(desc.Digest.String(), err)
		}
		defer rc.Close()
		vr, err := NewVerifyReader(&netReader{rc: rc, wrap: func(e error) error { return r.wrap(desc.Digest.String(), e) }}, desc)
		if err != nil {
			return err
		}
		b, err = io.ReadAll(vr)
		return err
	})
	if err != nil {
		return nil, err
	}
	r.cacheManifest(desc.Digest, b)
	return b, nil
}

// Push implements Store. A manifest with a subject is pushed under its referrer
// tag where the registry lacks the Referrers API, and Push then reads the
// subject's referrers back and fails unless the new record is among them.
//
// Push does not retry a blob upload itself (it cannot rewind rd); Copy restarts
// failed uploads from scratch.
func (r *Remote) Push(ctx context.Context, desc ocispec.Descriptor, rd io.Reader) error {
	if err := ValidateDescriptor(desc); err != nil {
		return err
	}
	if IsManifest(desc.MediaType) && desc.Size > MaxManifestSize {
		return fmt.Errorf("manifest %s: %w", desc.Digest, ErrTooLarge)
	}
	parent := ctx
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	vr, err := verified(rd, desc)
	if err != nil {
		return err
	}
	if !IsManifest(desc.MediaType) {
		if err := r.repo.Blobs().Push(ctx, desc, vr); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return r.wrap(desc.Digest.String(), err)
		}
		return nil
	}
	b, err := io.ReadAll(vr)
	if err != nil {
		return err
	}
	node, err := ParseNode(desc, b)
	if err != nil {
		return err
	}
	r.waitIndexing(desc.Digest)
	if node.Subject != nil {
		r.mu.Lock()
		delete(r.ahead, node.Subject.Digest) // a listing taken before this push
		r.mu.Unlock()
	}
	put := func(ref string) error {
		return retry(ctx, func() error {
			if err := r.repo.Manifests().PushReference(ctx, desc, bytes.NewReader(b), ref); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
				return r.wrap(desc.Digest.String(), err)
			}
			return nil
		})
	}
	if node.Subject == nil {
		if err := put(desc.Digest.String()); err != nil {
			return err
		}
	} else {
		api, err := r.referrersAPI(ctx, *node.Subject)
		if err == nil && !api && !r.apiKnown() {
			// A repository that does not exist yet cannot say whether it has
			// the API: create it with this manifest, then ask again.
			if err = put(desc.Digest.String()); err == nil {
				api, err = r.referrersAPI(ctx, *node.Subject)
			}
		}
		if err != nil {
			return err
		}
		ref := desc.Digest.String()
		var index <-chan fetched
		if !api {
			ref = ReferrerTag(node.Subject.Digest, desc.Digest)
			// Read the subject's fallback index while the record goes up,
			// after this process's last update of it is in.
			r.waitIndexing(node.Subject.Digest)
			bctx, bcancel := r.ctx(parent)
			defer func() {
				if index == nil {
					bcancel()
				}
			}()
			pre := r.fetchAsync(bctx, fallbackTag(node.Subject.Digest))
			if err := put(ref); err != nil {
				return err
			}
			d := ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, ArtifactType: node.ArtifactType}
			index = pre
			r.startIndexing(node.Subject.Digest, func(written func()) {
				defer bcancel()
				r.updateFallbackIndex(bctx, node.Subject.Digest, d, pre, written)
			})
		} else if err := put(ref); err != nil {
			return err
		}
	}
	r.cacheManifest(desc.Digest, b)
	if node.Subject == nil {
		return nil
	}
	// The courtesy index is written while the record is read back.
	return r.readBack(ctx, *node.Subject, desc)
}

// fetched is the outcome of a manifest read by tag.
type fetched struct {
	b   []byte
	err error
}

// fetchAsync reads the manifest tag names in the background.
func (r *Remote) fetchAsync(ctx context.Context, tag string) <-chan fetched {
	ch := make(chan fetched, 1)
	go func() {
		_, b, err := r.fetchTagged(ctx, tag)
		ch <- fetched{b, err}
	}()
	return ch
}

func fallbackTag(subject digest.Digest) string {
	return strings.TrimSuffix(referrerTagPrefix(subject), ".")
}

// startIndexing runs f in the background as an index update for subject; f
// calls written once the index lists the new referrer (or the update gives
// up), which releases pushes of subject.
func (r *Remote) startIndexing(subject digest.Digest, f func(written func())) {
	r.mu.Lock()
	p := r.indexing[subject]
	if p == nil {
		p = &pending{done: make(chan struct{})}
		r.indexing[subject] = p
	}
	p.n++
	r.background.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.background.Done()
		written := sync.OnceFunc(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if p.n--; p.n == 0 {
				close(p.done)
				delete(r.indexing, subject)
			}
		})
		defer written()
		f(written)
	}()
}

// pending counts the index updates of one subject not yet written.
type pending struct {
	n    int
	done chan struct{} // closed when n falls to 0
}

// waitIndexing waits until the index updates of subject started so far are
// written.
func (r *Remote) waitIndexing(subject digest.Digest) {
	r.mu.Lock()
	p := r.indexing[subject]
	r.mu.Unlock()
	if p != nil {
		<-p.done
	}
}

// settle waits for every background index update to end.
func (r *Remote) settle() { r.background.Wait() }

// warmReferrers asks the registry about the Referrers API in the background,
// so that the first referrer push finds the answer waiting.
func (r *Remote) warmReferrers(ctx context.Context, subject ocispec.Descriptor) {
	if r.apiKnown() {
		return
	}
	go func() { _, _ = r.referrersAPI(ctx, subject) }()
}

// apiKnown reports whether the registry has said whether it has the Referrers API.
func (r *Remote) apiKnown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.api != 0
}

// updateFallbackIndex adds d to the OCI fallback referrers index of subject (tag
// "sha256-<hex>"), through which other tools (oras discover, cosign) find
// referrers on registries without the Referrers API. The index is a courtesy to
// them: it is rewritten read-modify-write, so concurrent pushers can still drop
// each other's entries from it, and feval never relies on it. Failures are
// ignored for the same reason.
//
// first, if not nil, delivers the first read of the index (made while the
// referrer was pushed); written is called once the index lists d.
func (r *Remote) updateFallbackIndex(ctx context.Context, subject digest.Digest, d ocispec.Descriptor, first <-chan fetched, written func()) {
	tag := fallbackTag(subject)
	for i := range 3 {
		idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
		var b []byte
		var err error
		if i == 0 && first != nil {
			f := <-first
			b, err = f.b, f.err
		} else {
			_, b, err = r.fetchTagged(ctx, tag)
		}
		switch {
		case err == nil:
			if json.Unmarshal(b, &idx) != nil {
				return // not an index feval may rewrite
			}
		case !errors.Is(err, ErrNotFound):
			return
		}
		for _, m := range idx.Manifests {
			if m.Digest == d.Digest {
				return
			}
		}
		idx.Manifests = append(idx.Manifests, d)
		nb, err := json.Marshal(idx)
		if err != nil || len(nb) > MaxManifestSize {
			return
		}
		nd := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(nb), Size: int64(len(nb))}
		if r.repo.Manifests().PushReference(ctx, nd, bytes.NewReader(nb), tag) != nil {
			return
		}
		written()
		// Loop: read the index back, and add d again if a concurrent writer
		// replaced the index without it.
	}
}

// ErrNotDiscoverable reports a referrer that was pushed but that the registry
// does not list among its subject's referrers.
var ErrNotDiscoverable = errors.New("pushed record is not discoverable")

// readBack lists subject's referrers until desc is among them, the way
// discovery finds it: through the Referrers API, or by the listing of the
// subject's referrer tags and a read of desc's tag, which must answer desc.
// (Other referrers and the fallback index do not bear on desc's discovery and
// are not read.) Registries with the Referrers API may index asynchronously,
// so the listing is retried for a few seconds before Push gives up.
func (r *Remote) readBack(ctx context.Context, subject, desc ocispec.Descriptor) error {
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		found, err := r.listed(ctx, subject, desc)
		if err != nil {
			return err
		}
		if found {
			return nil
		}
		if attempt == 6 {
			return fmt.Errorf("%s: %s, a referrer of %s, is not listed after push: %w",
				r.Name(), desc.Digest, subject.Digest, errors.Join(ErrRegistry, ErrNotDiscoverable))
		}
		select {
		case <-ctx.Done():
			return r.wrap(desc.Digest.String(), ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// listed reports whether discovery of subject's referrers finds desc.
func (r *Remote) listed(ctx context.Context, subject, desc ocispec.Descriptor) (bool, error) {
	api, err := r.referrersAPI(ctx, subject)
	if err != nil {
		return false, err
	}
	if api {
		cands, err := r.apiReferrers(ctx, subject)
		if err != nil {
			return false, err
		}
		for _, c := range cands {
			if c.Digest == desc.Digest {
				return true, nil
			}
		}
		return false, nil
	}
	tag := ReferrerTag(subject.Digest, desc.Digest)
	var tags []string
	var terr, ferr error
	var got ocispec.Descriptor
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tags, _, terr = r.referrerTags(ctx, subject.Digest)
	}()
	got, _, ferr = r.fetchTagged(ctx, tag)
	wg.Wait()
	if terr != nil {
		return false, terr
	}
	if errors.Is(ferr, ErrNotFound) {
		return false, nil
	}
	if ferr != nil {
		return false, ferr
	}
	return got.Digest == desc.Digest && slices.Contains(tags, tag), nil
}

// Exists implements Store.
func (r *Remote) Exists(ctx context.Context, desc ocispec.Descriptor) (bool, error) {
	if err := ValidateDescriptor(desc); err != nil {
		return false, err
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	var ok bool
	err := retry(ctx, func() error {
		var err error
		ok, err = r.repo.Exists(ctx, desc)
		if err != nil {
			return r.wrap(desc.Digest.String(), err)
		}
		return nil
	})
	return ok, err
}

// Resolve implements Store. It reads the manifest ref names in one GET and
// describes it by its content's own digest; the manifest is kept, so the copy
// that usually follows does not fetch it again.
func (r *Remote) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	desc, _, err := r.fetchTagged(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if want, err := digest.Parse(ref); err == nil && want != desc.Digest {
		return ocispec.Descriptor{}, fmt.Errorf("%s: the registry answered content of digest %s: %w", ref, desc.Digest, ErrDigestMismatch)
	}
	if err := ValidateDescriptor(desc); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s resolves to a bad descriptor: %w", ref, err)
	}
	return desc, nil
}

// PushTagged pushes the manifest desc under tag in one request: the manifest
// and its name arrive together. A manifest with a subject is pushed with Push
// (it needs its referrer tag) and then tagged.
func (r *Remote) PushTagged(ctx context.Context, desc ocispec.Descriptor, rd io.Reader, tag string) error {
	if !ValidTag(tag) {
		return fmt.Errorf("tag %q: %w", tag, ErrBadReference)
	}
	if err := ValidateDescriptor(desc); err != nil {
		return err
	}
	if !IsManifest(desc.MediaType) || desc.Size > MaxManifestSize {
		return fmt.Errorf("tagging %s: not a manifest within %d bytes: %w", desc.Digest, MaxManifestSize, ErrInvalid)
	}
	vr, err := verified(rd, desc)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(vr)
	if err != nil {
		return err
	}
	node, err := ParseNode(desc, b)
	if err != nil {
		return err
	}
	if node.Subject != nil {
		if err := r.Push(ctx, desc, bytes.NewReader(b)); err != nil {
			return err
		}
		return r.Tag(ctx, desc, tag)
	}
	r.waitIndexing(desc.Digest)
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	err = retry(ctx, func() error {
		if err := r.repo.Manifests().PushReference(ctx, desc, bytes.NewReader(b), tag); err != nil {
			return r.wrap(tag, err)
		}
		return nil
	})
	if err == nil {
		r.cacheManifest(desc.Digest, b)
	}
	return err
}

// Tag implements Store.
func (r *Remote) Tag(ctx context.Context, desc ocispec.Descriptor, tag string) error {
	if !ValidTag(tag) {
		return fmt.Errorf("tag %q: %w", tag, ErrBadReference)
	}
	if err := ValidateDescriptor(desc); err != nil {
		return err
	}
	b, err := r.fetchManifest(ctx, desc)
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	return retry(ctx, func() error {
		if err := r.repo.Manifests().PushReference(ctx, desc, bytes.NewReader(b), tag); err != nil {
			return r.wrap(tag, err)
		}
		return nil
	})
}

// ReferrerTag is the tag under which a referrer is pushed to a registry without
// the Referrers API: "sha256-", the subject's 64 hex digits, ".", and the first
// 48 hex digits of the referrer's digest (120 characters, within the OCI tag
// grammar). Only sha256 digests are used by feval.
func ReferrerTag(subject, referrer digest.Digest) string {
	hex := referrer.Encoded()
	return referrerTagPrefix(subject) + hex[:min(len(hex), 48)]
}

func referrerTagPrefix(subject digest.Digest) string {
	return subject.Algorithm().String() + "-" + subject.Encoded() + "."
}

// Referrers implements Store through the Referrers API or, where the registry
// lacks it, the referrer tags (and, for stores written by other tools, the
// OCI fallback referrers index).
func (r *Remote) Referrers(ctx context.Context, subject ocispec.Descriptor, artifactType string) ([]ocispec.Descriptor, error) {
	if err := ValidateDescriptor(subject); err != nil {
		return nil, err
	}
	var l *listing
	if walking(ctx) {
		r.mu.Lock()
		l = r.ahead[subject.Digest]
		delete(r.ahead, subject.Digest)
		r.mu.Unlock()
	}
	var all []ocispec.Descriptor
	var err error
	if l != nil {
		select {
		case <-l.done:
			all, err = l.refs, l.err
		case <-ctx.Done():
			return nil, r.wrap(subject.Digest.String(), ctx.Err())
		}
	}
	if l == nil || err != nil {
		ctx, cancel := r.ctx(ctx)
		defer cancel()
		all, err = r.referrers(ctx, subject, false)
	}
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for _, d := range all {
		if artifactType == "" || d.ArtifactType == artifactType {
			out = append(out, d)
		}
	}
	return out, nil
}

// referrers lists and verifies every referrer of subject, sorted by digest.
// The tag listing and the fallback index are read at once, and the candidates
// they name are fetched Parallel at a time.
//
// Until the registry has said whether it has the Referrers API, the referrer
// tags and the fallback index are read while it is asked; their answers are
// dropped if it has the API.
//
// With lazyIndex (a listing started ahead of a walk, off its critical path),
// the fallback index is read only if the tag listing names it, after the
// listing: one request less for a subject nothing indexed, such as a
// signature.
func (r *Remote) referrers(ctx context.Context, subject ocispec.Descriptor, lazyIndex bool) ([]ocispec.Descriptor, error) {
	var cands []ocispec.Descriptor
	var tags []string
	var terr, ierr error
	var wg sync.WaitGroup
	listTags := func() {
		wg.Add(1)
		if !lazyIndex {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cands, ierr = r.legacyIndex(ctx, subject.Digest)
			}()
		}
		go func() {
			defer wg.Done()
			var indexed bool
			tags, indexed, terr = r.referrerTags(ctx, subject.Digest)
			if lazyIndex && terr == nil && indexed {
				cands, ierr = r.legacyIndex(ctx, subject.Digest)
			}
		}()
	}
	known := r.apiKnown()
	if !known {
		listTags()
	}
	api, err := r.referrersAPI(ctx, subject)
	if err == nil && !api && known {
		listTags()
	}
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if api {
		cands, tags = nil, nil
		cands, err = r.apiReferrers(ctx, subject)
	} else {
		if terr != nil {
			err = terr
		} else if ierr != nil {
			err = ierr
		}
	}
	if err != nil {
		return nil, err
	}
	if walking(ctx) && len(cands) <= maxAhead {
		// The walk will ask for the referrers of each referrer: list them
		// while the candidates themselves are read.
		for _, c := range cands {
			if ValidateDescriptor(c) == nil && IsManifest(c.MediaType) {
				r.listAhead(ctx, c)
			}
		}
	}
	// What to read: each candidate by digest, then each referrer tag that no
	// candidate already accounts for (a tag names its referrer by the first
	// 48 hex digits of its digest).
	type read struct {
		desc ocispec.Descriptor // by digest, or
		tag  string             // by tag
		b    []byte
		err  error
	}
	var reads []*read
	byDigest := map[digest.Digest]bool{}
	for _, c := range cands {
		if ValidateDescriptor(c) != nil || !IsManifest(c.MediaType) || byDigest[c.Digest] {
			continue
		}
		byDigest[c.Digest] = true
		reads = append(reads, &read{desc: c})
	}
	prefix := referrerTagPrefix(subject.Digest)
	var covered []string // tags read only if their candidate cannot be
	for _, t := range tags {
		if coveredBy(byDigest, strings.TrimPrefix(t, prefix)) {
			covered = append(covered, t)
			continue
		}
		reads = append(reads, &read{tag: t})
	}
	do := func(rd *read) {
		if rd.tag != "" {
			rd.desc, rd.b, rd.err = r.fetchTagged(ctx, rd.tag)
		} else {
			rd.b, rd.err = r.fetchManifest(ctx, rd.desc)
		}
	}
	parallel(reads, do)
	seen := map[digest.Digest]bool{}
	var out []ocispec.Descriptor
	keep := func(d ocispec.Descriptor, b []byte) {
		node, err := ParseNode(d, b)
		if err != nil || node.Subject == nil || node.Subject.Digest != subject.Digest || seen[d.Digest] {
			return // not a referrer of subject, whatever the listing said
		}
		seen[d.Digest] = true
		d.ArtifactType = node.ArtifactType
		d.Annotations = nil
		out = append(out, d)
	}
	var late []*read
	for _, rd := range reads {
		skip := errors.Is(rd.err, ErrNotFound) || errors.Is(rd.err, ErrTooLarge)
		if rd.tag == "" {
			skip = skip || errors.Is(rd.err, ErrDigestMismatch) || errors.Is(rd.err, ErrSizeMismatch)
		} else {
			skip = skip || errors.Is(rd.err, ErrInvalid)
		}
		if skip {
			continue
		}
		if rd.err != nil {
			return nil, rd.err
		}
		if rd.tag != "" && !strings.HasPrefix(rd.desc.Digest.Encoded(), strings.TrimPrefix(rd.tag, prefix)) {
			continue // a tag that does not name its content
		}
		keep(rd.desc, rd.b)
	}
	for _, t := range covered {
		if !seenPrefix(seen, strings.TrimPrefix(t, prefix)) {
			late = append(late, &read{tag: t})
		}
	}
	parallel(late, do)
	for _, rd := range late {
		if errors.Is(rd.err, ErrNotFound) || errors.Is(rd.err, ErrTooLarge) || errors.Is(rd.err, ErrInvalid) {
			continue
		}
		if rd.err != nil {
			return nil, rd.err
		}
		if !strings.HasPrefix(rd.desc.Digest.Encoded(), strings.TrimPrefix(rd.tag, prefix)) {
			continue
		}
		keep(rd.desc, rd.b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out, nil
}

type walkKey struct{}

// withWalk marks ctx as that of a walk that lists the referrers of every
// referrer it finds (Copy with Referrers): a Remote then starts those listings
// while it reads the referrers themselves. Listings started this way do not
// start more.
func withWalk(ctx context.Context) context.Context { return context.WithValue(ctx, walkKey{}, true) }

func walking(ctx context.Context) bool { v, _ := ctx.Value(walkKey{}).(bool); return v }

// endWalk drops the listings started ahead of a walk that has ended.
func (r *Remote) endWalk() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.ahead)
}

// listAhead starts listing the referrers of subject in the background, unless
// a listing of it is already waiting.
func (r *Remote) listAhead(ctx context.Context, subject ocispec.Descriptor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ahead[subject.Digest] != nil {
		return
	}
	l := &listing{done: make(chan struct{})}
	r.ahead[subject.Digest] = l
	// Not cancelled with the listing that started it, and not walking.
	ctx, cancel := r.ctx(context.WithValue(context.WithoutCancel(ctx), walkKey{}, false))
	go func() {
		defer cancel()
		defer close(l.done)
		l.refs, l.err = r.referrers(ctx, subject, true)
	}()
}

// parallel runs do on every item, Parallel at a time.
func parallel[T any](items []T, do func(T)) {
	if len(items) == 1 {
		do(items[0])
		return
	}
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			do(it)
		}()
	}
	wg.Wait()
}

// coveredBy reports whether a digest in set has hex digits starting with
// prefix.
func coveredBy(set map[digest.Digest]bool, prefix string) bool {
	if len(prefix) < 48 {
		return false
	}
	for d := range set {
		if strings.HasPrefix(d.Encoded(), prefix) {
			return true
		}
	}
	return false
}

// apiReferrers lists subject's referrers through the Referrers API.
func (r *Remote) apiReferrers(ctx context.Context, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	var cands []ocispec.Descriptor
	err := retry(ctx, func() error {
		cands = cands[:0]
		err := r.repo.Referrers(ctx, subject, "", func(refs []ocispec.Descriptor) error {
			cands = append(cands, refs...)
			return nil
		})
		if err != nil && !errors.Is(err, errdef.ErrNotFound) {
			return r.wrap(subject.Digest.String(), err)
		}
		return nil
	})
	return cands, err
}

// errStopListing ends a tag listing early.
var errStopListing = errors.New("stop listing")

// seenPrefix reports whether a digest in seen has hex digits starting with
// prefix (a referrer tag names its referrer by the first 48).
func seenPrefix(seen map[digest.Digest]bool, prefix string) bool {
	if len(prefix) < 48 {
		return false
	}
	for d := range seen {
		if strings.HasPrefix(d.Encoded(), prefix) {
			return true
		}
	}
	return false
}

// referrerTags lists the tags that name referrers of subject, and reports
// whether the fallback tag "sha256-<hex>" (which sorts just before every
// referrer tag of subject) is among the repository's tags. The listing starts
// after "sha256-" and the first 63 hex digits of subject, just before the
// fallback tag, and ends at the first tag past the referrer tags when the
// registry returns tags in lexical order (as the distribution spec requires);
// a registry that does not sort is listed in full.
func (r *Remote) referrerTags(ctx context.Context, subject digest.Digest) ([]string, bool, error) {
	prefix := referrerTagPrefix(subject)
	index := strings.TrimSuffix(prefix, ".")
	last := index[:len(index)-1]
	var out []string
	var indexed bool
	err := retry(ctx, func() error {
		out, indexed = out[:0], false
		prev, sorted := "", true
		err := r.repo.Tags(ctx, last, func(tags []string) error {
			for _, t := range tags {
				if t <= prev {
					sorted = false
				}
				prev = t
				if t == index {
					indexed = true
				} else if strings.HasPrefix(t, prefix) {
					out = append(out, t)
				} else if sorted && t > prefix {
					return errStopListing
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopListing) && !errors.Is(err, errdef.ErrNotFound) {
			return r.wrap("tag list", err)
		}
		return nil
	})
	return out, indexed, err
}

// legacyIndex reads the OCI fallback referrers index (tag "sha256-<hex>") that
// other tools maintain, if there is one.
func (r *Remote) legacyIndex(ctx context.Context, subject digest.Digest) ([]ocispec.Descriptor, error) {
	d, b, err := r.fetchTagged(ctx, strings.TrimSuffix(referrerTagPrefix(subject), "."))
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalid) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if d.MediaType != ocispec.MediaTypeImageIndex {
		return nil, nil
	}
	var idx ocispec.Index
	if json.Unmarshal(b, &idx) != nil {
		return nil, nil
	}
	return idx.Manifests, nil
}

// fetchTagged reads the manifest a tag names and describes it by its content's
// own digest, not by what the registry's headers claim.
func (r *Remote) fetchTagged(ctx context.Context, tag string) (ocispec.Descriptor, []byte, error) {
	var d ocispec.Descriptor
	var b []byte
	err := retry(ctx, func() error {
		desc, rc, err := r.repo.Manifests().FetchReference(ctx, tag)
		if err != nil {
			return r.wrap(tag, err)
		}
		defer rc.Close()
		b, err = io.ReadAll(&netReader{rc: io.NopCloser(io.LimitReader(rc, MaxManifestSize+1)), wrap: func(e error) error { return r.wrap(tag, e) }})
		if err != nil {
			return err
		}
		if len(b) > MaxManifestSize {
			return fmt.Errorf("%s: %w", tag, ErrTooLarge)
		}
		d = ocispec.Descriptor{MediaType: desc.MediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
		return nil
	})
	if err != nil {
		return d, nil, err
	}
	var probe struct {
		MediaType string `json:"mediaType"`
	}
	if json.Unmarshal(b, &probe) == nil && IsManifest(probe.MediaType) {
		d.MediaType = probe.MediaType
	}
	if !IsManifest(d.MediaType) {
		return d, nil, fmt.Errorf("%s: media type %q: %w", tag, d.MediaType, ErrInvalid)
	}
	r.cacheManifest(d.Digest, b)
	return d, b, nil
}

// WarmReferrers asks the registry in the background whether it has the
// Referrers API, before any subject is known: a command that resolves a tag
// and then lists referrers (pull) calls it first, so that the question and
// the resolve travel together instead of the question waiting for the
// resolve. It asks about a placeholder subject (the empty JSON blob's
// digest) and keeps only an unambiguous answer: 200 with an OCI image index
// (the Referrers API answers so for any subject) means yes; 404 with a body
// that is not a registry error (the route does not exist) means no; anything
// else is asked again about the real subject.
func (r *Remote) WarmReferrers(ctx context.Context) {
	if r.apiKnown() {
		return
	}
	go func() { _, _ = r.askReferrersAPI(ctx, ocispec.DescriptorEmptyJSON, true) }()
}

// referrersAPI reports whether the registry implements the Referrers API, asking
// it once: a GET of /v2/<repo>/referrers/<digest> answered 200 with an OCI image
// index means yes; 404 (other than for an unknown repository) means no.
func (r *Remote) referrersAPI(ctx context.Context, subject ocispec.Descriptor) (bool, error) {
	return r.askReferrersAPI(ctx, subject, false)
}

// askReferrersAPI is referrersAPI; with placeholder, subject is not a real
// one and only unambiguous answers count (see WarmReferrers).
func (r *Remote) askReferrersAPI(ctx context.Context, subject ocispec.Descriptor, placeholder bool) (bool, error) {
	for {
		r.mu.Lock()
		api, probing := r.api, r.probing
		if api == 0 && probing == nil {
			r.probing = make(chan struct{})
			r.mu.Unlock()
			break
		}
		r.mu.Unlock()
		if api != 0 {
			return api > 0, nil
		}
		select { // another caller is asking: take its answer
		case <-probing:
		case <-ctx.Done():
			return false, r.wrap("referrers API", ctx.Err())
		}
		r.mu.Lock()
		api = r.api
		r.mu.Unlock()
		if api != 0 {
			return api > 0, nil
		}
		// It failed, or the repository did not exist yet: ask ourselves.
	}
	defer func() {
		r.mu.Lock()
		close(r.probing)
		r.probing = nil
		r.mu.Unlock()
	}()
	scheme := "https"
	if r.repo.PlainHTTP {
		scheme = "http"
	}
	u := fmt.Sprintf("%s://%s/v2/%s/referrers/%s", scheme, r.ref.Host(), r.ref.Repository, subject.Digest)
	var state int8
	err := retry(ctx, func() error {
		actx := auth.AppendRepositoryScope(ctx, r.ref, auth.ActionPull)
		req, err := http.NewRequestWithContext(actx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Accept", ocispec.MediaTypeImageIndex)
		resp, err := r.repo.Client.Do(req)
		if err != nil {
			return r.wrap("referrers API", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		switch {
		case resp.StatusCode == http.StatusOK:
			ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			state = -1
			if ct == ocispec.MediaTypeImageIndex {
				state = 1
			} else if placeholder {
				state = 0
			}
		case resp.StatusCode == http.StatusNotFound && strings.Contains(string(body), "NAME_UNKNOWN"):
			state = 0 // the repository does not exist yet: ask again later
		case placeholder && (resp.StatusCode != http.StatusNotFound || isRegistryError(body)):
			state = 0 // not unambiguous about a placeholder: ask about the subject
		case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusBadRequest,
			resp.StatusCode == http.StatusMethodNotAllowed:
			state = -1
		default:
			return r.wrap("referrers API", &errcode.ErrorResponse{Method: req.Method, URL: req.URL, StatusCode: resp.StatusCode})
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if state != 0 {
		r.mu.Lock()
		r.api = state
		r.mu.Unlock()
	}
	return state > 0, nil
}

// isRegistryError reports whether body is a registry's JSON error answer
// ({"errors": [...]}) rather than a plain "no such route".
func isRegistryError(body []byte) bool {
	var e struct {
		Errors []json.RawMessage `json:"errors"`
	}
	return json.Unmarshal(body, &e) == nil && len(e.Errors) > 0
}

// Close implements Store: it waits for the fallback index updates still
// running.
func (r *Remote) Close() error {
	r.settle()
	return nil
}

func (r *Remote) wrap(what string, err error) error {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var resp *errcode.ErrorResponse
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return fmt.Errorf("%s in %s: %w", what, r.Name(), ErrNotFound)
	case errors.Is(err, ErrRegistry), errors.Is(err, ErrUnreachable), errors.Is(err, ErrDigestMismatch),
		errors.Is(err, ErrSizeMismatch), errors.Is(err, ErrInvalid), errors.Is(err, ErrTooLarge):
		return err
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &dnsErr), errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Errorf("%s: %w (%v); check the address and that the registry is running", r.Name(), ErrUnreachable, err)
	case errors.As(err, &resp):
		msg := fmt.Sprintf("%s: %s: the registry answered %d %s", r.Name(), what, resp.StatusCode, http.StatusText(resp.StatusCode))
		if len(resp.Errors) > 0 {
			msg += " (" + resp.Errors[0].Error() + ")"
		}
		return &errWithMsg{msg: msg, err: errors.Join(ErrRegistry, err)}
	}
	return registryErr("%s: %s: %s", err, r.Name(), what, describeNetErr(err))
}
