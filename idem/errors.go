package idem

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrDuplicate is matched (with errors.Is) by every *DuplicateError: the
	// key is already claimed, either by a live holder (StateProcessing) or by a
	// run that finished within its dedup window (StateCompleted).
	ErrDuplicate = errors.New("idem: duplicate claim")

	// ErrLeaseLost is returned by Complete, Release and Renew, and by Run and
	// RunExternal, when the claim is no longer held under this token: its lease
	// expired and another holder took the key over, Cleanup deleted the expired
	// row, or the claim was already completed or released. Work guarded by the
	// lost claim must not be treated as the one true run.
	ErrLeaseLost = errors.New("idem: lease lost (the claim expired and was taken over, completed or released)")

	// ErrEmptySegment is returned when a key part is empty or blank. ComposeKey
	// and Claim wrap it with the index of the offending part.
	ErrEmptySegment = errors.New("idem: empty key segment")
)

// DuplicateError reports the row that blocked a claim. errors.Is(err,
// ErrDuplicate) is true for it; use errors.As to read the fields.
type DuplicateError struct {
	// Key is the full composed key, "namespace:scope:segment".
	Key string
	// State is the state of the existing row: StateProcessing while a holder
	// is working on it, StateCompleted once it finished.
	State State
	// Holder is the holder recorded on the existing row.
	Holder string
	// ExpiresAt is when the existing row stops blocking claims, by the
	// database clock: the end of the lease for StateProcessing, the end of the
	// dedup window for StateCompleted.
	ExpiresAt time.Time
	// Token is the fencing token of the existing row.
	Token int64
}

// Error implements error.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("idem: duplicate claim on %q (state=%s, holder=%q, expires_at=%s)",
		e.Key, e.State, e.Holder, e.ExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrDuplicate) true.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }
