package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/hookline/hookline/internal/adminclient"
)

func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func printDeadList(w io.Writer, l *adminclient.ItemList) {
	if len(l.Items) == 0 {
		fmt.Fprintln(w, "no dead items")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tDESTINATION\tEVENT_ID\tEVENT_TYPE\tREASON\tATTEMPTS\tDEAD_AT\tLAST_ERROR")
	for _, it := range l.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", oneLine(it.ID, 20), oneLine(it.Source, 30), oneLine(it.Destination, 30),
			oneLine(it.EventID, 40), oneLine(it.EventType, 30), oneLine(it.Reason, 20), it.Attempts, it.DeadAt.UTC().Format(time.RFC3339),
			oneLine(it.LastError, 60))
	}
	_ = tw.Flush()
	if l.NextCursor != "" {
		fmt.Fprintf(w, "\nmore items: add --cursor %s\n", safe(l.NextCursor))
	}
}

func printDeadItem(w io.Writer, it *adminclient.ItemDetail) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	// Every value is escaped (safe): a line break or an escape sequence in
	// an id, a type or an error shows as \n, \x1b, ... on its own row.
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, safe(v)) }
	row("id", it.ID)
	row("source", it.Source)
	row("destination", it.Destination)
	row("event_id", it.EventID)
	row("event_type", it.EventType)
	row("reason", it.Reason)
	row("attempts", fmt.Sprint(it.Attempts))
	row("dead_at", it.DeadAt.UTC().Format(time.RFC3339Nano))
	row("last_error", it.LastError)
	row("content_type", it.ContentType)
	if it.DeliveryID != nil {
		row("delivery_id", *it.DeliveryID)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "headers:")
	names := make([]string, 0, len(it.Headers))
	for k := range it.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range it.Headers[k] {
			fmt.Fprintf(w, "  %s: %s\n", safe(k), safe(v))
		}
	}
	// The payload keeps its own lines, each indented like the headers, so
	// no line of it passes for one of the command's.
	switch {
	case it.Payload == "":
		fmt.Fprintln(w, "payload: (empty)")
		return
	case it.PayloadEncoding == "base64":
		fmt.Fprintln(w, "payload (not UTF-8, shown as base64):")
	default:
		fmt.Fprintln(w, "payload:")
	}
	fmt.Fprintln(w, safeLines(it.Payload, "  "))
}

func printBulk(w io.Writer, verb string, b *adminclient.Bulk) {
	if b.DryRun {
		fmt.Fprintf(w, "would %s %d dead items (dry run)\n", verb, b.Matched)
		return
	}
	done := 0
	switch {
	case b.Retried != nil:
		done = *b.Retried
	case b.Deleted != nil:
		done = *b.Deleted
	}
	past := map[string]string{"retry": "retried", "delete": "deleted"}[verb]
	fmt.Fprintf(w, "matched %d, %s %d", b.Matched, past, done)
	if b.Skipped > 0 {
		fmt.Fprintf(w, ", skipped %d (their source is not configured on the server)", b.Skipped)
	}
	fmt.Fprintln(w)
}
