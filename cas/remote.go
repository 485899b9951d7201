package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Remote is a Store in one repository of an OCI registry.
type Remote struct {
	repo *remote.Repository
	ref  registry.Reference
}

// RemoteOptions configures access to a registry.
type RemoteOptions struct {
	// PlainHTTP forces plain HTTP. Loopback hosts use plain HTTP regardless.
	PlainHTTP bool
	// DockerConfig is the credentials file; empty means the Docker default.
	DockerConfig string
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
	client := &auth.Client{
		Client: &http.Client{Transport: retry.NewTransport(&http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			ResponseHeaderTimeout: 60 * time.Second,
			MaxIdleConnsPerHost:   8,
		})},
		Cache: auth.NewCache(),
	}
	if err == nil {
		client.Credential = credentials.Credential(creds)
	}
	repo.Client = client
	repo.SkipReferrersGC = true
	return &Remote{repo: repo, ref: ref}, nil
}

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

// Fetch implements Store.
func (r *Remote) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	var rc io.ReadCloser
	var err error
	if IsManifest(desc.MediaType) {
		rc, err = r.repo.Manifests().Fetch(ctx, desc)
	} else {
		rc, err = r.repo.Blobs().Fetch(ctx, desc)
	}
	if err != nil {
		return nil, r.wrap(desc.Digest.String(), err)
	}
	return NewVerifyReader(rc, desc)
}

// Push implements Store. Pushing a manifest with a subject also maintains the
// fallback referrers tag when the registry lacks the Referrers API.
func (r *Remote) Push(ctx context.Context, desc ocispec.Descriptor, rd io.Reader) error {
	if IsManifest(desc.MediaType) && desc.Size > MaxManifestSize {
		return fmt.Errorf("manifest %s: %w", desc.Digest, ErrTooLarge)
	}
	vr, err := verified(rd, desc)
	if err != nil {
		return err
	}
	if err := r.repo.Push(ctx, desc, vr); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return r.wrap(desc.Digest.String(), err)
	}
	return nil
}

// Exists implements Store.
func (r *Remote) Exists(ctx context.Context, desc ocispec.Descriptor) (bool, error) {
	ok, err := r.repo.Exists(ctx, desc)
	if err != nil {
		return false, r.wrap(desc.Digest.String(), err)
	}
	return ok, nil
}

// Resolve implements Store.
func (r *Remote) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	desc, err := r.repo.Resolve(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, r.wrap(ref, err)
	}
	return desc, nil
}

// Tag implements Store.
func (r *Remote) Tag(ctx context.Context, desc ocispec.Descriptor, tag string) error {
	if !ValidTag(tag) {
		return fmt.Errorf("tag %q: %w", tag, ErrBadReference)
	}
	if err := r.repo.Tag(ctx, desc, tag); err != nil {
		return r.wrap(tag, err)
	}
	return nil
}

// Referrers implements Store through the Referrers API or the fallback tag scheme.
func (r *Remote) Referrers(ctx context.Context, subject ocispec.Descriptor, artifactType string) ([]ocispec.Descriptor, error) {
	var out []ocispec.Descriptor
	err := r.repo.Referrers(ctx, subject, artifactType, func(refs []ocispec.Descriptor) error {
		out = append(out, refs...)
		return nil
	})
	if err != nil && !errors.Is(err, errdef.ErrNotFound) {
		return nil, r.wrap(subject.Digest.String(), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	// The fallback index can list a referrer twice after concurrent updates.
	uniq := out[:0]
	var last digest.Digest
	for _, d := range out {
		if d.Digest != last {
			uniq = append(uniq, d)
		}
		last = d.Digest
	}
	return uniq, nil
}

// Close implements Store.
func (r *Remote) Close() error { return nil }

func (r *Remote) wrap(what string, err error) error {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, errdef.ErrNotFound):
		return fmt.Errorf("%s in %s: %w", what, r.Name(), ErrNotFound)
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w (%v); check the address and that the registry is running", r.Name(), ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", r.Name(), err)
}
