package idem_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
)

func TestComposeKey(t *testing.T) {
	t.Parallel()

	t.Run("JoinsWithColons", func(t *testing.T) {
		t.Parallel()
		key, err := idem.ComposeKey("hookline", "stripe.charge", "evt_123")
		require.NoError(t, err)
		require.Equal(t, "hookline:stripe.charge:evt_123", key)
	})

	t.Run("KeepsColonsInsideParts", func(t *testing.T) {
		t.Parallel()
		key, err := idem.ComposeKey("hookline", "scope", "user_1:req_2")
		require.NoError(t, err)
		require.Equal(t, "hookline:scope:user_1:req_2", key)
	})

	for name, parts := range map[string][]string{
		"NoParts":         nil,
		"EmptyNamespace":  {"", "scope", "seg"},
		"BlankScope":      {"ns", "  \t", "seg"},
		"EmptySegment":    {"ns", "scope", ""},
		"EmptyOfMany":     {"a", "b", "c", "", "e"},
		"OnlyPartIsBlank": {" "},
	} {
		t.Run("RejectsBlank/"+name, func(t *testing.T) {
			t.Parallel()
			key, err := idem.ComposeKey(parts...)
			require.ErrorIs(t, err, idem.ErrEmptySegment)
			require.Empty(t, key)
		})
	}

	t.Run("NamesThePart", func(t *testing.T) {
		t.Parallel()
		_, err := idem.ComposeKey("ns", "scope", " ")
		require.ErrorIs(t, err, idem.ErrEmptySegment)
		require.ErrorContains(t, err, "part 2 of 3 (Segment)")

		_, err = idem.ComposeKey("a", "b", "c", "")
		require.ErrorContains(t, err, "part 3 of 4")
	})
}
