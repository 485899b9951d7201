// Package cas is feval's content-addressed store.
//
// A Store holds OCI blobs and manifests named by their digest, human tags that point
// at manifests, and the referrers graph (manifests whose subject is another
// manifest). Two backends implement it:
//
//   - Layout, a local OCI image layout directory (the embedded default). Blobs are
//     written atomically (temporary file, verify, fsync, rename, fsync directory;
//     a Copy into a layout fsyncs all its blobs together once all have arrived,
//     then renames them); index.json is saved in batches under an inter-process lock, merging with what
//     other processes saved meanwhile, so any number of processes may write to one
//     layout at once.
//   - Remote, an OCI registry reached through oras-go, with referrers found through
//     the Referrers API or, where the registry lacks it, one tag per referrer
//     (ReferrerTag), so that concurrent writers never overwrite each other.
//
// Every read is verified: Fetch returns a reader that fails with ErrDigestMismatch
// or ErrSizeMismatch instead of delivering bytes that do not match the descriptor.
// Everything read from a store is untrusted: descriptors are validated
// (ValidateDescriptor) before use, and invalid entries are skipped and reported
// (ErrInvalid), never a panic. Registry connections fail after an idle period
// without progress, and transient registry failures are retried (ErrRegistry
// when they persist). Copy orders its writes so that a copy cut short is
// invisible to readers; FsckStore checks and repairs a layout.
// The package knows nothing about what the artifacts mean.
package cas
