package cas

import (
	"context"
	"fmt"
	"io"
	"sync"

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
	// Subjects follows subject links upward from every copied manifest.
	Subjects bool
	// Progress receives byte counts; nil means the context's (WithProgress).
	Progress Progress
	// Tag, if set, names root in dst once everything else is there. A
	// registry receives root's manifest and the tag in one request.
	Tag string
}

// Parallel is how many blobs Copy moves at once.
const Parallel = 4

// taggedPusher is a store that can receive a manifest and its tag together.
type taggedPusher interface {
	PushTagged(ctx context.Context, desc ocispec.Descriptor, r io.Reader, tag string) error
}

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
func Copy(ctx context.Context, src, dst Store, root ocispec.Descriptor, opts CopyOptions) (CopyResult, error) {
	prog := progressOr(ctx, opts.Progress)
	p := &planner{ctx: ctx, src: src, opts: opts, seen: map[digest.Digest]bool{}, raw: map[digest.Digest][]byte{}}
	if err := p.visit(root); err != nil {
		return CopyResult{}, err
	}
	var res CopyResult
	var total int64
	var todo []ocispec.Descriptor
	for _, d := range p.order {
		if _, isManifest := p.raw[d.Digest]; isManifest {
			todo = append(todo, d)
			continue
		}
		ok, err := dst.Exists(ctx, d)
		if err != nil {
			return res, err
		}
		if !ok {
			todo = append(todo, d)
			total += d.Size
		}
	}
	prog.Start(total)
	defer prog.Done()
	// Blobs are independent of each other and nothing lists them until their
	// manifest arrives, so they all move first, Parallel at a time; manifests
	// then follow one by one in dependency order.
	var blobs, mans []ocispec.Descriptor
	for _, d := range todo {
		if _, ok := p.raw[d.Digest]; ok {
			mans = append(mans, d)
		} else {
			blobs = append(blobs, d)
		}
	}
	if err := copyBlobs(ctx, src, dst, blobs, prog); err != nil {
		return res, err
	}
	res.Blobs = len(blobs)
	for _, d := range blobs {
		res.Bytes += d.Size
	}
	for _, d := range mans {
		var err error
		if tp, ok := dst.(taggedPusher); ok && opts.Tag != "" && d.Digest == root.Digest {
			err = tp.PushTagged(ctx, d, bytesReader(p.raw[d.Digest]), opts.Tag)
		} else {
			err = dst.Push(ctx, d, bytesReader(p.raw[d.Digest]))
		}
		if err != nil {
			return res, fmt.Errorf("copying manifest %s: %w", d.Digest, err)
		}
		res.Manifests = append(res.Manifests, d)
	}
	if _, ok := dst.(taggedPusher); opts.Tag != "" && (!ok || p.raw[root.Digest] == nil) {
		if err := dst.Tag(ctx, root, opts.Tag); err != nil {
			return res, err
		}
	}
	return res, nil
}

// copyBlobs moves blobs from src to dst, Parallel at a time; the first failure
// stops the rest.
func copyBlobs(ctx context.Context, src, dst Store, blobs []ocispec.Descriptor, prog Progress) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, Parallel)
	errs := make(chan error, len(blobs))
	var wg sync.WaitGroup
	for _, d := range blobs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := retry(ctx, func() error {
				rc, err := src.Fetch(ctx, d)
				if err != nil {
					return err
				}
				defer rc.Close()
				return dst.Push(ctx, d, &countReader{r: rc, p: prog})
			})
			if err != nil {
				errs <- fmt.Errorf("copying blob %s: %w", d.Digest, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err, ok := <-errs; ok {
		return err
	}
	return ctx.Err()
}

type planner struct {
	ctx   context.Context
	src   Store
	opts  CopyOptions
	seen  map[digest.Digest]bool
	raw   map[digest.Digest][]byte
	order []ocispec.Descriptor
}

// visit appends desc's closure to p.order in dependency order.
func (p *planner) visit(desc ocispec.Descriptor) error {
	if p.seen[desc.Digest] {
		return nil
	}
	p.seen[desc.Digest] = true
	if !IsManifest(desc.MediaType) {
		p.order = append(p.order, desc)
		return nil
	}
	node, b, err := FetchNode(p.ctx, p.src, desc)
	if err != nil {
		return fmt.Errorf("reading %s: %w", desc.Digest, err)
	}
	if node.Subject != nil && p.opts.Subjects {
		if err := p.visit(*node.Subject); err != nil {
			return err
		}
	}
	for _, c := range node.Children {
		if err := p.visit(c); err != nil {
			return err
		}
	}
	if p.opts.Referrers {
		refs, err := p.src.Referrers(p.ctx, desc, "")
		if err != nil {
			return fmt.Errorf("listing referrers of %s: %w", desc.Digest, err)
		}
		for _, r := range refs {
			if err := p.visit(r); err != nil {
				return err
			}
		}
	}
	p.raw[desc.Digest] = b
	p.order = append(p.order, desc)
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
