package cas

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Progress receives byte counts from long transfers. Implementations must be cheap;
// NoProgress discards everything.
type Progress interface {
	// Start announces the total number of bytes the operation will move.
	Start(total int64)
	// Add reports n more bytes moved.
	Add(n int64)
	// Done ends the operation.
	Done()
}

type noProgress struct{}

func (noProgress) Start(int64) {}
func (noProgress) Add(int64)   {}
func (noProgress) Done()       {}

// NoProgress is the Progress that reports nothing.
var NoProgress Progress = noProgress{}

// CopyOptions selects how much of the graph around a root Copy moves.
type CopyOptions struct {
	// Referrers copies, recursively, every manifest whose subject is a copied
	// manifest (signatures, reveals, verdicts).
	Referrers bool
	// Subjects follows subject links upward from every copied manifest. A
	// subject reached that way comes with its signatures (referrers of type
	// SignatureArtifactType), recursively, and nothing else that refers to it:
	// pushing a round publishes its task, not the task's other rounds.
	Subjects bool
	// Siblings, with Subjects and Referrers, copies every referrer of a subject
	// reached upward (a round's other commitments and reveals, the task's other
	// rounds): what a validator or an auditor gathers to check a record in its
	// context. Publishing leaves it off.
	Siblings bool
	// Progress receives byte counts; nil means the context's (WithProgress).
	Progress Progress
	// Tag, if set, names root in dst once everything else is there. A
	// registry receives root's manifest and the tag in one request.
	Tag string
}

// SignatureArtifactType is the artifact type of a signature (a sigstore
// bundle): the one kind of referrer a subject reached upward brings along
// without CopyOptions.Siblings.
const SignatureArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// Parallel is how many blobs Copy moves at once.
const Parallel = 4

// parallelChecks is how many existence checks Copy runs at once.
const parallelChecks = 8

// taggedPusher is a store that can receive a manifest and its tag together.
type taggedPusher interface {
	PushTagged(ctx context.Context, desc ocispec.Descriptor, r io.Reader, tag string) error
}

// stagingStore is a store that can take a manifest's bytes without listing
// the manifest (a local layout lists manifests in index.json): Copy writes the
// manifests alongside the blobs and lists them, in dependency order, once
// everything has arrived.
type stagingStore interface {
	stageManifest(ctx context.Context, desc ocispec.Descriptor, raw []byte) error
}

// settler is a store that finishes work in the background (a registry's
// courtesy fallback index); settle waits for it.
type settler interface{ settle() }

// referrersWarmer is a store that can learn, ahead of the first referrer push,
// how it will store referrers (a registry's Referrers API probe).
type referrersWarmer interface {
	warmReferrers(ctx context.Context, subject ocispec.Descriptor)
}

// walkEnder is a store that keeps referrer listings started ahead of a walk
// (withWalk) until the walk ends.
type walkEnder interface{ endWalk() }

// CopyResult lists what a copy moved.
type CopyResult struct {
	Manifests []ocispec.Descriptor // every manifest in the copied graph, in push order
	Blobs     int
	Bytes     int64 // bytes actually transferred (content already present is skipped)
}

// Copy moves root and its closure from src to dst in an order that makes a copy
// cut short at any point invisible to readers of dst: blobs and child manifests
// before the manifest that lists them, and a manifest's referrers (its signatures,
// and records about it with their own signatures) before the manifest itself, so
// that a manifest reachable in dst already has its closure and its signatures.
// (Subjects reached with opts.Subjects come before the manifest that names them.)
// Content dst already has is not transferred again. A blob transfer that fails
// transiently (a dropped connection, a server error) is retried from scratch with
// backoff.
//
// Blobs start moving as soon as the walk of the graph finds them, Parallel at a
// time, while the walk goes on listing referrers. Manifests are pushed one by
// one in dependency order, into a registry each as soon as the blobs it lists
// are there; into a local layout their bytes are written alongside the blobs,
// and the listing waits for every blob. Into a
// local layout every blob (and manifest) is written under a temporary name as
// it arrives and starts its writeback; once all have arrived they are fsynced
// together and only then named, so a copy that fails names none of them
// (beyond the first 64, each is synced and named as it arrives).
func Copy(ctx context.Context, src, dst Store, root ocispec.Descriptor, opts CopyOptions) (CopyResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prog := &lateProgress{p: progressOr(ctx, opts.Progress)}
	stager, staged := dst.(stagingStore)
	// Into a local layout, the blobs are synced together once all are in.
	var batch *syncBatch
	mctx := ctx
	if _, ok := dst.(*Layout); ok {
		batch = &syncBatch{}
		mctx = withBatch(ctx, batch)
		defer batch.discard() // a no-op once committed
	}
	m := &mover{ctx: mctx, cancel: cancel, src: src, dst: dst, prog: prog,
		sem: make(chan struct{}, Parallel), checks: make(chan struct{}, parallelChecks)}
	wctx := ctx
	if w, ok := src.(walkEnder); ok && opts.Referrers {
		wctx = withWalk(ctx)
		defer w.endWalk()
	}
	p := &planner{ctx: wctx, src: src, opts: opts, seen: map[digest.Digest]bool{}, raw: map[digest.Digest][]byte{}, blob: m.blob}
	if staged {
		p.manifest = func(d ocispec.Descriptor, raw []byte) { m.manifest(stager, d, raw) }
	}
	if err := p.visit(root, false); err != nil {
		cancel()
		m.wg.Wait()
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.err != nil {
			return CopyResult{}, m.err // what cut the walk short
		}
		return CopyResult{}, err
	}
	if w, ok := dst.(referrersWarmer); ok && p.subject != nil && !staged {
		w.warmReferrers(ctx, *p.subject)
	}
	m.checked.Wait()
	prog.Start(m.missing.Load())
	defer prog.Done()
	// Into a layout, manifests are listed once every blob is there; into a
	// registry, each manifest goes up as soon as its own blobs are there
	// (a signature while the artifact's layers are still uploading), still
	// one by one in dependency order.
	settled := false
	settle := func() error {
		if !settled {
			settled = true
			m.wg.Wait()
		}
		return m.failure()
	}
	defer func() {
		if !settled {
			cancel()
			m.wg.Wait()
		}
	}()
	if staged {
		if err := settle(); err != nil {
			return CopyResult{}, err
		}
	}
	if batch != nil {
		if err := batch.commit(dst.(*Layout)); err != nil {
			return CopyResult{}, fmt.Errorf("syncing the copied blobs: %w", err)
		}
	}
	var res CopyResult
	for _, d := range p.order {
		raw, isManifest := p.raw[d.Digest]
		if !isManifest {
			continue
		}
		if !staged {
			if err := m.waitChildren(d, raw); err != nil {
				return res, err
			}
		}
		var err error
		if tp, ok := dst.(taggedPusher); ok && opts.Tag != "" && d.Digest == root.Digest {
			err = tp.PushTagged(ctx, d, bytesReader(raw), opts.Tag)
		} else {
			err = dst.Push(ctx, d, bytesReader(raw))
		}
		if err != nil {
			return res, fmt.Errorf("copying manifest %s: %w", d.Digest, err)
		}
		res.Manifests = append(res.Manifests, d)
	}
	if err := settle(); err != nil {
		return res, err
	}
	res.Blobs, res.Bytes = int(m.blobs.Load()), m.bytes.Load()
	if _, ok := dst.(taggedPusher); opts.Tag != "" && (!ok || p.raw[root.Digest] == nil) {
		if err := dst.Tag(ctx, root, opts.Tag); err != nil {
			return res, err
		}
	}
	if s, ok := dst.(settler); ok {
		s.settle()
	}
	return res, nil
}

// mover moves the blobs (and, into a staging store, the manifests) a Copy's
// walk hands it: each blob is checked for in dst (parallelChecks at a time)
// and, if missing, transferred (Parallel at a time). The first failure cancels
// the rest.
type mover struct {
	ctx          context.Context
	cancel       context.CancelFunc
	src, dst     Store
	prog         Progress
	sem, checks  chan struct{}
	wg, checked  sync.WaitGroup
	missing      atomic.Int64
	blobs, bytes atomic.Int64

	mu   sync.Mutex
	err  error
	done map[digest.Digest]chan struct{} // closed when a blob's transfer ends
}

// waitChildren waits until every blob manifest d lists has arrived in dst
// (or the copy has failed).
func (m *mover) waitChildren(d ocispec.Descriptor, raw []byte) error {
	node, err := ParseNode(d, raw)
	if err != nil {
		return err
	}
	for _, c := range node.Children {
		m.mu.Lock()
		ch := m.done[c.Digest]
		m.mu.Unlock()
		if ch == nil {
			continue // a child manifest: pushed before d
		}
		select {
		case <-ch:
		case <-m.ctx.Done():
		}
		if err := m.failure(); err != nil {
			return err
		}
	}
	return nil
}

func (m *mover) fail(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	m.cancel()
}

func (m *mover) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	return m.ctx.Err()
}

// acquire takes a slot of sem unless the copy has ended.
func (m *mover) acquire(sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return m.ctx.Err() == nil
	case <-m.ctx.Done():
		return false
	}
}

func (m *mover) blob(d ocispec.Descriptor) {
	m.wg.Add(1)
	m.checked.Add(1)
	ch := make(chan struct{})
	m.mu.Lock()
	if m.done == nil {
		m.done = map[digest.Digest]chan struct{}{}
	}
	m.done[d.Digest] = ch
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer close(ch)
		if !m.acquire(m.checks) {
			m.checked.Done()
			return
		}
		ok, err := m.dst.Exists(m.ctx, d)
		<-m.checks
		if err == nil && !ok {
			m.missing.Add(d.Size)
		}
		m.checked.Done()
		if err != nil {
			m.fail(err)
			return
		}
		if ok || !m.acquire(m.sem) {
			return
		}
		defer func() { <-m.sem }()
		err = retry(m.ctx, func() error {
			rc, err := m.src.Fetch(m.ctx, d)
			if err != nil {
				return err
			}
			defer rc.Close()
			return m.dst.Push(m.ctx, d, &countReader{r: rc, p: m.prog})
		})
		if err != nil {
			m.fail(fmt.Errorf("copying blob %s: %w", d.Digest, err))
			return
		}
		m.blobs.Add(1)
		m.bytes.Add(d.Size)
	}()
}

// manifest writes a manifest's bytes into a staging store, unlisted.
func (m *mover) manifest(st stagingStore, d ocispec.Descriptor, raw []byte) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if !m.acquire(m.sem) {
			return
		}
		defer func() { <-m.sem }()
		if err := st.stageManifest(m.ctx, d, raw); err != nil {
			m.fail(fmt.Errorf("copying manifest %s: %w", d.Digest, err))
		}
	}()
}

// lateProgress passes byte counts to p, holding those that arrive before
// Start (transfers begin while the walk is still finding what to move).
type lateProgress struct {
	p       Progress
	mu      sync.Mutex
	started bool
	early   int64
}

func (l *lateProgress) Start(total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.p.Start(total)
	l.started = true
	if l.early > 0 {
		l.p.Add(l.early)
	}
}

func (l *lateProgress) Add(n int64) {
	l.mu.Lock()
	if !l.started {
		l.early += n
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.p.Add(n)
}

func (l *lateProgress) Done() { l.p.Done() }

type planner struct {
	ctx      context.Context
	src      Store
	opts     CopyOptions
	seen     map[digest.Digest]bool
	raw      map[digest.Digest][]byte
	order    []ocispec.Descriptor
	blob     func(ocispec.Descriptor)         // called for each blob found
	manifest func(ocispec.Descriptor, []byte) // if set, called for each manifest found
	subject  *ocispec.Descriptor              // the first subject a manifest names
}

// visit appends desc's closure to p.order in dependency order. up says desc
// was reached through a subject link: without Siblings, only its signatures
// are listed among its referrers.
func (p *planner) visit(desc ocispec.Descriptor, up bool) error {
	if p.seen[desc.Digest] {
		return nil
	}
	p.seen[desc.Digest] = true
	if !IsManifest(desc.MediaType) {
		p.order = append(p.order, desc)
		p.blob(desc)
		return nil
	}
	onlySigs := up && !p.opts.Siblings
	node, b, err := FetchNode(p.ctx, p.src, desc)
	if err != nil {
		return fmt.Errorf("reading %s: %w", desc.Digest, err)
	}
	if node.Subject != nil && p.subject == nil {
		p.subject = node.Subject
	}
	// List the referrers while the children are walked.
	var refs []ocispec.Descriptor
	var rerr error
	listed := make(chan struct{})
	ctx, cancel := context.WithCancel(p.ctx)
	defer func() { cancel(); <-listed }()
	if p.opts.Referrers {
		filter := ""
		if onlySigs {
			filter = SignatureArtifactType
		}
		go func() {
			defer close(listed)
			refs, rerr = p.src.Referrers(ctx, desc, filter)
		}()
	} else {
		close(listed)
	}
	if node.Subject != nil && p.opts.Subjects {
		if err := p.visit(*node.Subject, true); err != nil {
			return err
		}
	}
	for _, c := range node.Children {
		if err := p.visit(c, up); err != nil {
			return err
		}
	}
	if p.opts.Referrers {
		<-listed
		if rerr != nil {
			return fmt.Errorf("listing referrers of %s: %w", desc.Digest, rerr)
		}
		for _, r := range refs {
			if onlySigs && r.ArtifactType != SignatureArtifactType {
				continue // a registry may ignore the filter
			}
			if err := p.visit(r, onlySigs); err != nil {
				return err
			}
		}
	}
	p.raw[desc.Digest] = b
	p.order = append(p.order, desc)
	if p.manifest != nil {
		p.manifest(desc, b)
	}
	return nil
}

type countReader struct {
	r io.Reader
	p Progress
}

func (c *countReader) verifies() ocispec.Descriptor {
	if v, ok := c.r.(verifying); ok {
		return v.verifies()
	}
	return ocispec.Descriptor{}
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.Add(int64(n))
	return n, err
}
