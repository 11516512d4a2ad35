package idem

// Telemetry holds optional callbacks fired by a Store. A nil func is skipped.
// Callbacks run synchronously on the goroutine doing the claim, so they
// should be quick and must not block; they must be safe for concurrent use.
type Telemetry struct {
	// Claimed fires after a claim is taken (inserted or taken over).
	Claimed func(Event)
	// Completed fires after a claim is marked completed. Run fires it after
	// the work transaction commits; Claim.Complete fires it once its UPDATE
	// succeeds, which is before the caller commits when q is a transaction.
	Completed func(Event)
	// Duplicate fires when a claim is refused because the key is held.
	// Event.State, Holder and Token describe the existing row.
	Duplicate func(Event)
}

// Event describes one claim lifecycle step for Telemetry.
type Event struct {
	// Key is the full composed key.
	Key string
	// Namespace and Scope are the first two parts of Key, handy as metric tags.
	Namespace, Scope string
	// Holder is the claim's holder, or the existing row's holder on Duplicate.
	Holder string
	// State is the existing row's state on Duplicate, StateProcessing on
	// Claimed and StateCompleted on Completed.
	State State
	// Token is the claim's fencing token, or the existing row's on Duplicate.
	Token int64
}

func emit(f func(Event), ev Event) {
	if f != nil {
		f(ev)
	}
}
