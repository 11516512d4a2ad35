package groupcommit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hookline/hookline/internal/groupcommit"
)

// Concurrent callers each hand over one item and get their own result; the
// run function sees them in batches (here it would be one statement, one
// COMMIT).
func ExampleCommitter() {
	upper := groupcommit.New(func(ctx context.Context, words []string) ([]string, error) {
		out := make([]string, len(words))
		for i, w := range words {
			out[i] = strings.ToUpper(w)
		}
		return out, nil
	}, groupcommit.Options{MaxBatch: 64})

	words := []string{"claim", "forward", "complete"}
	results := make([]string, len(words))
	var wg sync.WaitGroup
	for i, w := range words {
		wg.Go(func() {
			r, err := upper.Do(context.Background(), w)
			if err != nil {
				panic(err)
			}
			results[i] = r
		})
	}
	wg.Wait()
	fmt.Println(results)
	// Output: [CLAIM FORWARD COMPLETE]
}
