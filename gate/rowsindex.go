package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"unicode/utf8"
)

// The rows index of rollouts submission format 3 (docs/PROTOCOL.md §6,
// docs/FORMAT.md "Rollouts submissions, format 3"). The rows file is stored
// as its own uncompressed layer; the index, a second small layer, gives for
// every row its task id, its claimed reward, where its bytes are and their
// SHA-256, so that an audit reads the claimed score and the sampled rows
// without reading the others. All integers are unsigned big-endian:
//
//	header   32 bytes: magic "FVRIDX01", rows n (u32), rewards r (u32),
//	         meta size (u32), ids size (u32), rows size (u64)
//	meta     submission.json, byte for byte
//	rewards  r times: length L (u8, 1..129) and L bytes of a canonical reward,
//	         strictly ascending byte-wise
//	entries  n times 56 bytes, in rows-file order: offset (u64), length (u32,
//	         the row's bytes with its line feed), reward (u32, a position in
//	         rewards), id offset (u32), id length (u32), SHA-256 of the row's
//	         bytes with its line feed (32 bytes)
//	order    n times u32: the entry positions sorted by task id, byte-wise,
//	         strictly ascending
//	ids      ids size bytes: the task ids of the entries, concatenated in
//	         entry order
//
// The entries tile the rows file: the first starts at 0, each starts where
// the one before ends, the last ends at the rows size. So the index, through
// the row hashes, fixes every byte of the rows file.
const (
	RowsIndexMagic      = "FVRIDX01"
	rowsIndexHeaderSize = 32
	rowsIndexEntrySize  = 56
	// MaxRowsIndexMeta bounds the submission.json carried by an index.
	MaxRowsIndexMeta = 4 << 10
	maxRewardText    = 2*maxRewardDigits + 1
)

// RuleRowsIndex: a format-3 submission's rows index is malformed, does not
// describe the rows layer, or names other task ids than the task's.
const RuleRowsIndex = "rows-index"

// ErrRowsIndex reports a rows index that does not parse or does not hold
// together (ParseRowsIndex).
var ErrRowsIndex = errors.New("malformed rows index")

// RowsIndex is a parsed, validated rows index. Its methods never fail on a
// value returned by ParseRowsIndex.
type RowsIndex struct {
	b        []byte
	n        int
	meta     []byte
	rewards  []string
	entries  []byte // n*56 bytes
	order    []byte // n*4 bytes
	ids      []byte
	rowsSize int64
	// idsDigest is SortedIDsDigest of the index's ids.
	idsDigest [32]byte
}

// RowsIndexLimits bound what ParseRowsIndex accepts.
type RowsIndexLimits struct {
	// MaxRows bounds the number of rows (the task's row count).
	MaxRows int
	// MaxRowBytes bounds one row, line feed excluded.
	MaxRowBytes int
}

func indexErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRowsIndex, fmt.Sprintf(format, args...))
}

// ParseRowsIndex parses and validates a rows index: the header's counts
// within lim, sections that add up to exactly len(b), canonical rewards in
// strictly ascending order, entries that tile a rows file of the header's
// size with rows of at most lim.MaxRowBytes bytes plus a line feed, reward
// and id references in bounds, ids of 1 to 1,024 bytes of UTF-8 without
// control characters, and an order that is a permutation sorting the ids
// strictly (so ids are unique). Errors wrap ErrRowsIndex. It allocates
// nothing in proportion to counts the header claims beyond len(b).
func ParseRowsIndex(b []byte, lim RowsIndexLimits) (*RowsIndex, error) {
	if len(b) < rowsIndexHeaderSize || string(b[:8]) != RowsIndexMagic {
		return nil, indexErr("no %q header", RowsIndexMagic)
	}
	be := binary.BigEndian
	n64, r64 := uint64(be.Uint32(b[8:])), uint64(be.Uint32(b[12:]))
	metaSize, idsSize := uint64(be.Uint32(b[16:])), uint64(be.Uint32(b[20:]))
	rowsSize := be.Uint64(b[24:])
	switch {
	case n64 == 0 || lim.MaxRows > 0 && n64 > uint64(lim.MaxRows):
		return nil, indexErr("%d rows (1 to %d)", n64, lim.MaxRows)
	case r64 == 0 || r64 > n64:
		return nil, indexErr("%d distinct rewards for %d rows", r64, n64)
	case metaSize == 0 || metaSize > MaxRowsIndexMeta:
		return nil, indexErr("submission.json of %d bytes (1 to %d)", metaSize, MaxRowsIndexMeta)
	case idsSize < n64 || idsSize > n64*maxClaimIDBytes:
		return nil, indexErr("ids section of %d bytes for %d rows", idsSize, n64)
	case rowsSize > math.MaxInt64:
		return nil, indexErr("rows size %d", rowsSize)
	}
	n := int(n64)
	x := &RowsIndex{b: b, n: n, rowsSize: int64(rowsSize)}
	rest := b[rowsIndexHeaderSize:]
	if uint64(len(rest)) < metaSize {
		return nil, indexErr("truncated in submission.json")
	}
	x.meta, rest = rest[:metaSize], rest[metaSize:]
	x.rewards = make([]string, 0, min(r64, uint64(len(rest))))
	for k := uint64(0); k < r64; k++ {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return nil, indexErr("truncated in reward %d", k)
		}
		l := int(rest[0])
		if l == 0 || l > maxRewardText {
			return nil, indexErr("reward %d of %d bytes", k, l)
		}
		s := string(rest[1 : 1+l])
		if _, err := ParseReward(s); err != nil {
			return nil, indexErr("reward %d: %v", k, err)
		}
		if k > 0 && x.rewards[k-1] >= s {
			return nil, indexErr("rewards not in strictly ascending order at %d", k)
		}
		x.rewards = append(x.rewards, s)
		rest = rest[1+l:]
	}
	if want := n64*(rowsIndexEntrySize+4) + idsSize; uint64(len(rest)) != want {
		return nil, indexErr("%d bytes after the rewards, the header needs %d", len(rest), want)
	}
	x.entries, rest = rest[:n*rowsIndexEntrySize], rest[n*rowsIndexEntrySize:]
	x.order, x.ids = rest[:n*4], rest[n*4:]
	var off, idOff uint64
	for i := 0; i < n; i++ {
		e := x.entries[i*rowsIndexEntrySize:]
		o, l, rw, io, il := be.Uint64(e), uint64(be.Uint32(e[8:])), be.Uint32(e[12:]), uint64(be.Uint32(e[16:])), uint64(be.Uint32(e[20:]))
		switch {
		case o != off:
			return nil, indexErr("row %d starts at %d, not where row %d ends (%d)", i+1, o, i, off)
		case l < 2 || lim.MaxRowBytes > 0 && l > uint64(lim.MaxRowBytes)+1:
			return nil, indexErr("row %d of %d bytes (2 to %d with its line feed)", i+1, l, lim.MaxRowBytes+1)
		case uint64(rw) >= r64:
			return nil, indexErr("row %d names reward %d of %d", i+1, rw, r64)
		case io != idOff:
			return nil, indexErr("task id of row %d at %d, not after the one before (%d)", i+1, io, idOff)
		case il == 0 || il > maxClaimIDBytes || io+il > idsSize:
			return nil, indexErr("task id of row %d of %d bytes", i+1, il)
		}
		id := x.ids[io : io+il]
		if !utf8.Valid(id) || hasControl(id) {
			return nil, indexErr("task id of row %d is not UTF-8 without control characters", i+1)
		}
		off += l
		idOff += il
		if off > rowsSize {
			return nil, indexErr("row %d ends at %d, past the rows size %d", i+1, off, rowsSize)
		}
	}
	if off != rowsSize || idOff != idsSize {
		return nil, indexErr("rows end at %d of %d bytes, ids at %d of %d", off, rowsSize, idOff, idsSize)
	}
	seen := make([]bool, n)
	sorted := make([]byte, 0, len(x.ids)+n) // the ids in order, each ended by 0x00
	var prev []byte
	for k := 0; k < n; k++ {
		i := be.Uint32(x.order[k*4:])
		if uint64(i) >= n64 || seen[i] {
			return nil, indexErr("order position %d names row %d: not a permutation", k, i)
		}
		seen[i] = true
		id := x.idBytes(int(i))
		if k > 0 && bytes.Compare(prev, id) >= 0 {
			return nil, indexErr("order position %d: task ids not strictly ascending", k)
		}
		prev = id
		sorted = append(append(sorted, id...), 0)
	}
	x.idsDigest = sha256.Sum256(sorted)
	return x, nil
}

// SortedIDsDigest is the SHA-256 of task ids given sorted byte-wise, each
// followed by a 0x00 byte (ids hold no control character, so the encoding
// is unambiguous). Two sets of ids are equal exactly when their digests are.
func SortedIDsDigest(sorted []string) [32]byte {
	size := 0
	for _, id := range sorted {
		size += len(id) + 1
	}
	b := make([]byte, 0, size)
	for _, id := range sorted {
		b = append(append(b, id...), 0)
	}
	return sha256.Sum256(b)
}

func (x *RowsIndex) entry(i int) []byte {
	return x.entries[i*rowsIndexEntrySize : (i+1)*rowsIndexEntrySize]
}

func (x *RowsIndex) idBytes(i int) []byte {
	e := x.entry(i)
	o, l := binary.BigEndian.Uint32(e[16:]), binary.BigEndian.Uint32(e[20:])
	return x.ids[o : o+l]
}

// Len is the number of rows.
func (x *RowsIndex) Len() int { return x.n }

// Meta is the submission.json the index carries.
func (x *RowsIndex) Meta() []byte { return x.meta }

// RowsSize is the size of the rows file the index describes.
func (x *RowsIndex) RowsSize() int64 { return x.rowsSize }

// TaskID is the task id of row i (0-based, rows-file order).
func (x *RowsIndex) TaskID(i int) string { return string(x.idBytes(i)) }

// Reward is the claimed reward of row i, canonical.
func (x *RowsIndex) Reward(i int) string {
	return x.rewards[binary.BigEndian.Uint32(x.entry(i)[12:])]
}

// Span is where row i's bytes, line feed included, are in the rows file.
func (x *RowsIndex) Span(i int) (off int64, n int) {
	e := x.entry(i)
	return int64(binary.BigEndian.Uint64(e)), int(binary.BigEndian.Uint32(e[8:]))
}

// RewardCounts returns the distinct claimed rewards and how many rows claim
// each.
func (x *RowsIndex) RewardCounts() ([]string, []int64) {
	counts := make([]int64, len(x.rewards))
	for i := 0; i < x.n; i++ {
		counts[binary.BigEndian.Uint32(x.entry(i)[12:])]++
	}
	return x.rewards, counts
}

// Find returns the row of a task id by binary search over the order.
func (x *RowsIndex) Find(id string) (int, bool) {
	lo, hi := 0, x.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		i := int(binary.BigEndian.Uint32(x.order[m*4:]))
		switch c := bytes.Compare(x.idBytes(i), []byte(id)); {
		case c == 0:
			return i, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

// SortedIDs calls fn with every task id in ascending byte-wise order; fn
// must not keep id. It stops when fn returns false.
func (x *RowsIndex) SortedIDs(fn func(id []byte) bool) {
	for k := 0; k < x.n; k++ {
		if !fn(x.idBytes(int(binary.BigEndian.Uint32(x.order[k*4:])))) {
			return
		}
	}
}

// CheckRow checks the bytes read for row i and decodes them: they must hash
// to the row's SHA-256 (else RuleRowsIndex), end with a line feed, parse as a
// row (ParseRow) and repeat the index's task id and reward exactly (else
// RuleClaimsMismatch). Line is set to i+1.
func (x *RowsIndex) CheckRow(i int, b []byte) (Row, *RowError) {
	e := x.entry(i)
	row, rerr := Row{}, (*RowError)(nil)
	switch sum := sha256.Sum256(b); {
	case !bytes.Equal(sum[:], e[24:56]):
		rerr = &RowError{Rule: RuleRowsIndex, Detail: "the row's bytes do not match their SHA-256 in the rows index"}
	case len(b) == 0 || b[len(b)-1] != '\n':
		rerr = &RowError{Rule: RuleRowsIndex, Detail: "the row does not end with a line feed"}
	default:
		row, rerr = ParseRow(b[:len(b)-1])
		if rerr == nil && (row.TaskID != x.TaskID(i) || row.RewardClaimed != x.Reward(i)) {
			rerr = &RowError{Rule: RuleClaimsMismatch, Detail: fmt.Sprintf("the row says task %q reward %q, its index entry task %q reward %q",
				clip(row.TaskID), clip(row.RewardClaimed), clip(x.TaskID(i)), x.Reward(i))}
		}
	}
	if rerr != nil {
		rerr.Line = i + 1
		return Row{}, rerr
	}
	return row, nil
}

// EncodeRowsIndex builds the rows index of a rows file (every line ending
// with a line feed, each a valid row, task ids unique) for a submission
// whose submission.json is meta. It fails, wrapping ErrRowsIndex, on rows
// that cannot be indexed; such a submission is packed in an earlier format.
func EncodeRowsIndex(meta, rows []byte) ([]byte, error) {
	switch {
	case len(meta) == 0 || len(meta) > MaxRowsIndexMeta:
		return nil, indexErr("submission.json of %d bytes", len(meta))
	case len(rows) == 0 || rows[len(rows)-1] != '\n':
		return nil, indexErr("the rows file does not end with a line feed")
	}
	type ent struct {
		off, n int
		id     string
		reward string
		sum    [32]byte
	}
	var es []ent
	idsSize := 0
	for off := 0; off < len(rows); {
		nl := bytes.IndexByte(rows[off:], '\n')
		line := rows[off : off+nl+1]
		r, rerr := ParseRow(line[:nl])
		if rerr != nil {
			return nil, indexErr("row %d: %s", len(es)+1, rerr.Detail)
		}
		if _, err := ParseReward(r.RewardClaimed); err != nil {
			return nil, indexErr("row %d: %v", len(es)+1, err)
		}
		if len(r.TaskID) == 0 || len(r.TaskID) > maxClaimIDBytes || hasControl([]byte(r.TaskID)) || nl+1 > math.MaxUint32 {
			return nil, indexErr("row %d: task id or row cannot be indexed", len(es)+1)
		}
		es = append(es, ent{off: off, n: nl + 1, id: r.TaskID, reward: r.RewardClaimed, sum: sha256.Sum256(line)})
		idsSize += len(r.TaskID)
		off += nl + 1
	}
	if len(es) > math.MaxUint32 || idsSize > math.MaxUint32 {
		return nil, indexErr("too many rows")
	}
	rewardSet := map[string]bool{}
	for _, e := range es {
		rewardSet[e.reward] = true
	}
	rewards := make([]string, 0, len(rewardSet))
	for r := range rewardSet {
		rewards = append(rewards, r)
	}
	slices.Sort(rewards)
	rpos := make(map[string]uint32, len(rewards))
	for i, r := range rewards {
		rpos[r] = uint32(i)
	}
	order := make([]uint32, len(es))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return cmpString(es[a].id, es[b].id) })
	for k := 1; k < len(order); k++ {
		if es[order[k-1]].id == es[order[k]].id {
			return nil, indexErr("task id %q on two rows", clip(es[order[k]].id))
		}
	}
	be := binary.BigEndian
	out := make([]byte, 0, rowsIndexHeaderSize+len(meta)+len(es)*(rowsIndexEntrySize+4)+idsSize+len(rewards)*8)
	out = append(out, RowsIndexMagic...)
	out = be.AppendUint32(out, uint32(len(es)))
	out = be.AppendUint32(out, uint32(len(rewards)))
	out = be.AppendUint32(out, uint32(len(meta)))
	out = be.AppendUint32(out, uint32(idsSize))
	out = be.AppendUint64(out, uint64(len(rows)))
	out = append(out, meta...)
	for _, r := range rewards {
		out = append(append(out, byte(len(r))), r...)
	}
	idOff := 0
	for _, e := range es {
		out = be.AppendUint64(out, uint64(e.off))
		out = be.AppendUint32(out, uint32(e.n))
		out = be.AppendUint32(out, rpos[e.reward])
		out = be.AppendUint32(out, uint32(idOff))
		out = be.AppendUint32(out, uint32(len(e.id)))
		out = append(out, e.sum[:]...)
		idOff += len(e.id)
	}
	for _, i := range order {
		out = be.AppendUint32(out, i)
	}
	for _, e := range es {
		out = append(out, e.id...)
	}
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RowsIndexed is implemented by the tree of a format-3 submission
// (protocol.LoadSubmissionFS): the rows index it was stored with, already
// checked against its layer digest. The rollouts gate checks such a tree
// through its index and never opens the rows file.
type RowsIndexed interface {
	RowsIndex() []byte
}

// checkRowsIndex is the gate of a format-3 submission: the index parses
// (ParseRowsIndex, rows of at most limits.MaxRowBytes), carries the tree's
// submission.json, describes a rows file of the rows file's size, and
// lists exactly the task ids (unknown-task-id, missing-task-id). Rows are not decoded: an audit checks each row it
// samples against its entry, so a bad row counts as a wrong claim.
func checkRowsIndex(fsys fs.FS, ix RowsIndexed, meta []byte, rowsPath string, taskIDs []string, limits RolloutLimits) []Violation {
	bad := func(format string, args ...any) []Violation {
		return []Violation{{Rule: RuleRowsIndex, Path: rowsPath, Detail: fmt.Sprintf(format, args...)}}
	}
	x, err := ParseRowsIndex(ix.RowsIndex(), RowsIndexLimits{MaxRows: len(taskIDs), MaxRowBytes: limits.MaxRowBytes})
	if err != nil {
		return bad("%v", err)
	}
	if !bytes.Equal(x.Meta(), meta) {
		return bad("the rows index carries another submission.json")
	}
	if fi, err := fs.Stat(fsys, rowsPath); err != nil || fi.Size() != x.RowsSize() {
		return bad("the rows index describes %d bytes of rows, the rows file differs", x.RowsSize())
	}
	// Task ids are judged as in the other formats: every id of the index
	// must be the task's (ids are unique, ParseRowsIndex), and every task id
	// must have a row.
	known := make(map[string]bool, len(taskIDs))
	for _, id := range taskIDs {
		known[id] = true
	}
	c := newCapped(rowsPath, limits.MaxViolationsPerRule)
	found := 0
	for i := 0; i < x.Len(); i++ {
		if id := x.TaskID(i); known[id] {
			found++
		} else {
			c.add(RuleUnknownTaskID, i+1, "task id %q is not in the task", clip(id))
		}
	}
	vs := c.result()
	if found < len(known) {
		vs = append(vs, Violation{Rule: RuleMissingTaskID, Path: rowsPath,
			Detail: fmt.Sprintf("%d task ids have no row", len(known)-found)})
	}
	return vs
}

// MatchIDs checks that the index lists exactly the task's ids: count of
// them, each one known. Index ids are unique (ParseRowsIndex), so this is set
// equality.
func (x *RowsIndex) MatchIDs(count int, known func(id []byte) bool) error {
	if count != x.n {
		return indexErr("%d rows for %d task ids", x.n, count)
	}
	var err error
	x.SortedIDs(func(id []byte) bool {
		if !known(id) {
			err = indexErr("task id %q is not in the task", clip(string(id)))
			return false
		}
		return true
	})
	return err
}

// MatchSortedIDs is MatchIDs for the task's ids given sorted byte-wise
// (strictly ascending) with their SortedIDsDigest: equal digests are equal
// sets, so the ids themselves are compared only to name a difference.
func (x *RowsIndex) MatchSortedIDs(sorted []string, digest [32]byte) error {
	if len(sorted) != x.n {
		return indexErr("%d rows for %d task ids", x.n, len(sorted))
	}
	if digest == x.idsDigest {
		return nil
	}
	k := 0
	var err error
	x.SortedIDs(func(id []byte) bool {
		if string(id) != sorted[k] {
			err = indexErr("task id %q is not the task's (%q is, in id order)", clip(string(id)), clip(sorted[k]))
			return false
		}
		k++
		return true
	})
	if err == nil { // a digest given for other ids than sorted
		err = indexErr("task ids differ from the task's")
	}
	return err
}

// RewardOf is the position of row i's claimed reward in the distinct
// rewards RewardCounts returns.
func (x *RowsIndex) RewardOf(i int) (int, bool) {
	if i < 0 || i >= x.n {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(x.entry(i)[12:])), true
}
