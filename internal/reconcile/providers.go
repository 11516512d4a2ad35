package reconcile

import "sort"

// defaultAPIURLs are the providers whose events API a run can list, each
// with its production API base URL.
var defaultAPIURLs = map[string]string{
	"stripe":     "https://api.stripe.com",
	"gocardless": "https://api.gocardless.com",
	"paddle":     "https://api.paddle.com",
}

// DefaultAPIURL is provider's API base URL; false when hookline cannot
// reconcile the provider.
func DefaultAPIURL(provider string) (string, bool) {
	u, ok := defaultAPIURLs[provider]
	return u, ok
}

// Providers lists the providers hookline can reconcile, sorted.
func Providers() []string {
	out := make([]string, 0, len(defaultAPIURLs))
	for p := range defaultAPIURLs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
