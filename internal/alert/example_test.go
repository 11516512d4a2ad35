package alert_test

import (
	"fmt"
	"time"

	"github.com/hookline/hookline/internal/alert"
)

func ExampleRule_Validate() {
	rules := []alert.Rule{
		{URL: "https://hooks.slack.com/services/T000/B000/XXXX", On: []string{"dead", "lag"}, LagThreshold: 10 * time.Minute},
		{URL: "https://hooks.slack.com/services/T000/B000/XXXX", On: []string{"dead", "circuit-open"}},
		{URL: "https://hooks.slack.com/services/T000/B000/XXXX", MinInterval: -time.Minute},
		{URL: ""}, // an unset ${SLACK_WEBHOOK_URL}
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			fmt.Printf("alerts[%d].%v\n", i, err)
		}
	}
	// Output:
	// alerts[1].on[1]: unknown kind "circuit-open" (want dead, circuit_open or lag)
	// alerts[2].min_interval: must be positive
	// alerts[3].url: required (an incoming webhook URL)
}
