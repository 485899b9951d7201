// Package bundle turns files, directories and records into deterministic OCI
// artifacts and back, and signs and verifies them.
//
// An artifact is an OCI 1.1 image manifest whose artifactType is
// application/vnd.feval.<kind>.v1+json. Its first layer is the record: canonical
// JSON (see Canonical) with the same media type. Further layers carry payloads:
// a directory as a normalised tar stream compressed with pinned zstd options, a
// file as raw bytes. Every payload layer records the digest and size of its
// uncompressed content in annotations, the identity that survives a change of
// compressor. The manifest itself is canonical JSON with a fixed creation time, so
// the same inputs give the same manifest digest in any process and any store.
//
// Signatures are Sigstore bundles (DSSE envelopes around in-toto statements whose
// subject is the signed manifest's digest) attached as OCI referrers. Signing uses
// deterministic ECDSA (RFC 6979), so signing the same manifest with the same key
// twice gives identical bytes. docs/FORMAT.md specifies all of it.
package bundle
