package providers_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
)

func TestArrayItems(t *testing.T) {
	byID := func(el gjson.Result) (providers.Event, error) {
		if id := el.Get("id").Str; id != "" {
			return providers.Event{ID: id}, nil
		}
		return providers.Event{}, providers.ErrNoEventID
	}
	split := func(body string) ([]providers.Item, error) {
		b := []byte(body)
		return providers.ArrayItems(b, gjson.GetBytes(b, "events"), "events", byID)
	}

	body := `{"events": [ {"id":"a", "n": [1, {"x": "]"}]},` + "\r\n" + `{"id":"b"} ]}`
	items, err := split(body)
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Equal(t, `{"id":"a", "n": [1, {"x": "]"}]}`, string(items[0].Body))
	require.Equal(t, `{"id":"b"}`, string(items[1].Body))
	for _, it := range items {
		require.Equal(t, string(it.Body), body[it.Offset:it.Offset+len(it.Body)])
	}
	require.Equal(t, []string{"a", "b"}, []string{items[0].Event.ID, items[1].Event.ID})

	for body, want := range map[string]error{
		`{"events": []}`:                  providers.ErrMalformed,
		`{"events": [{"id":"a"}, 3]}`:     providers.ErrMalformed,
		`{"events": [{"id":"a"}, {}]}`:    providers.ErrNoEventID,
		`{"events": [{"id":"a"}, "{}"]}`:  providers.ErrMalformed,
		`{"events": [{"id":"a"}, null ]}`: providers.ErrMalformed,
	} {
		_, err := split(body)
		require.ErrorIs(t, err, want, body)
	}
	_, err = split(`{"events": [{"id":"a"}, {}]}`)
	require.ErrorContains(t, err, "events[1]")
	require.True(t, errors.Is(err, providers.ErrNoEventID))
}
