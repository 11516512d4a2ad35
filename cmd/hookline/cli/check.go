package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/migrations"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/swsenders"
)

// checkUsage is the help of `hookline check`.
const checkUsage = `usage: hookline check [--config FILE] [--db]

Validate the configuration as serve would (exit 2 names the bad field) and
print what it configures; with --db, also that Postgres is reachable and
migrated (else exit 2 naming database_url).
`

func (c *command) check(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (default $HOOKLINE_CONFIG, then ./hookline.yaml)")
	db := fs.Bool("db", false, "also check that Postgres is reachable and migrated")
	if err := parseFlags(fs, args, stdout, checkUsage); err != nil {
		return err
	}
	path := configPath(*cfgPath)
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	// What serve would refuse too, with the Go handlers this program
	// registers (none in cmd/hookline).
	if err := app.Check(cfg, app.Options{Handlers: c.handlers}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	fmt.Fprintf(stdout, "listen %s, workers %d, max_body_bytes %d, ingest batch %v, admin %s\n",
		cfg.Listen, cfg.Workers, cfg.MaxBodyBytes, cfg.BatchEnabled(), map[bool]string{true: "on", false: "off (no admin_token)"}[cfg.AdminToken != ""])
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tPROVIDER\tSECRETS\tON_DUPLICATE\tLEASE\tDEDUP_WINDOW\tORDERING\tRECONCILE\tDESTINATIONS")
	for _, s := range cfg.Sources {
		var dests []string
		for _, d := range s.Destinations {
			switch {
			case d.URL != "":
				dests = append(dests, d.Name+"="+jobs.RedactURL(d.URL))
			case d.Handler != "":
				dests = append(dests, d.Name+"=handler:"+d.Handler)
			default:
				dests = append(dests, d.Name+"=-")
			}
		}
		ordering, rec := "-", "-"
		if o := s.Ordering; o != nil {
			ordering = "key " + o.Key
			if o.By != "" {
				ordering += ", by " + o.By + ", stale " + o.Stale
			}
		}
		if r := s.Reconcile; r != nil {
			rec = "on demand"
			if r.Every > 0 {
				rec = "every " + r.Every.D().String()
			}
			rec += ", lookback " + r.Lookback.D().String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Provider, len(s.Secrets), s.OnDuplicate, s.Lease.D(), s.DedupWindow.D(),
			ordering, rec, strings.Join(dests, " "))
	}
	tw.Flush()
	if !*db {
		return nil
	}
	if err := checkDatabase(cfg, stdout); err != nil {
		// check answers 0 or 2 naming the field: here database_url.
		return &exitError{2, fmt.Errorf("database_url: %w", err)}
	}
	return nil
}

// checkDatabase is check --db: Postgres at cfg's database_url is reachable
// and every migration is applied.
func checkDatabase(cfg *config.Config, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := app.NewPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres unreachable: %w", err)
	}
	st, err := migrations.Check(ctx, pool)
	if err != nil {
		return err
	}
	printStatus(stdout, st)
	if !st.Current() {
		return fmt.Errorf("database not migrated: run `hookline migrate up`")
	}
	fmt.Fprintln(stdout, "database: reachable and migrated")
	return nil
}

// probes are sample settings that let `hookline providers` build each
// adapter to describe it (and document what each needs).
var probes = map[string]struct {
	secrets  []string
	settings map[string]any
	headers  string // shown instead of the probe's headers, which a source configures
}{
	"adyen":            {secrets: []string{"44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"}},
	"appstore":         {settings: map[string]any{"bundle_id": "com.example.app", "app_apple_id": 1234567890}},
	"braintree":        {secrets: []string{"public_key:private_key"}},
	"googleplay":       {settings: map[string]any{"audience": "https://hooks.example.com/webhooks/googleplay", "service_account": "rtdn-push@example-project.iam.gserviceaccount.com"}},
	"hmac":             {secrets: []string{"s"}, settings: map[string]any{"header": "X-Signature"}, headers: "per source: hmac.header"},
	"paypal":           {settings: map[string]any{"webhook_id": "WH-1"}},
	"plaid":            {secrets: []string{"s"}, settings: map[string]any{"client_id": "c"}},
	"sendgrid":         {secrets: []string{"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="}}, // a verification key (SendGrid's SDK test key)
	"sns":              {secrets: []string{"arn:aws:sns:us-east-1:123456789012:orders"}},
	"square":           {secrets: []string{"s"}, settings: map[string]any{"notification_url": "https://example.com/webhooks/square"}},
	"standardwebhooks": {secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
	"svix":             {secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
}

// probeSecrets are the secrets describe builds an adapter without a probe
// with, in the format its scheme takes: `whsec_` + base64 for the Standard
// Webhooks senders (Polar takes any text), user:password for the HTTP
// Basic entries of the engine's table, else any text.
func probeSecrets(name string) []string {
	if s, ok := swsenders.Lookup(name); ok && !s.RawSecret {
		return []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	}
	if s, ok := hmacspec.Lookup(name); ok && s.Mode == hmacspec.Basic {
		return []string{"hookline:probe"}
	}
	return []string{"whsec_probe"}
}

// describe builds the named adapter with probe settings.
func describe(name string) (providers.Provider, providers.Description, error) {
	pr, ok := probes[name]
	if !ok {
		pr.secrets = probeSecrets(name)
	}
	p, err := providers.New(name, providers.Config{Source: "probe", Secrets: pr.secrets, Settings: settingsFunc(pr.settings)})
	if err != nil {
		return nil, providers.Description{}, err
	}
	var d providers.Description
	if ds, ok := p.(providers.Describer); ok {
		d = ds.Describe()
	}
	return p, d, nil
}

// providersUsage is the help of `hookline providers`.
const providersUsage = `usage: hookline providers

List the provider adapters: the headers each reads, its default event id,
whether the id is signed, its timestamp tolerance and whether hookline send
can sign its deliveries. No flags.
`

func cmdProviders(args []string, stdout io.Writer) error {
	if err := parseFlags(flag.NewFlagSet("providers", flag.ContinueOnError), args, stdout, providersUsage); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tHEADERS\tDEFAULT EVENT ID\tID SIGNED\tTOLERANCE\tSIGNS")
	for _, name := range providers.Names() {
		p, d, err := describe(name)
		if err != nil {
			fmt.Fprintf(tw, "%s\t(%v)\t\t\t\t\n", name, err)
			continue
		}
		_, signs := p.(providers.Signer)
		tol := "-"
		if d.DefaultTolerance > 0 {
			tol = d.DefaultTolerance.String()
		}
		id := d.DefaultEventID
		if id == "" {
			id = "(configure event_id)"
		}
		headers := strings.Join(d.Headers, ", ")
		switch {
		case probes[name].headers != "":
			headers = probes[name].headers
		case headers == "":
			headers = "(in the body)"
		}
		if len(d.FallbackHeaders) > 0 {
			headers += " (fallback: " + strings.Join(d.FallbackHeaders, ", ") + ")"
		}
		signed := "yes"
		if !d.IDSigned {
			signed = "no"
			if _, ok := p.(providers.ContentKeyer); ok {
				signed = "no (replays keyed on the signed content)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, headers, id, signed, tol, map[bool]string{true: "yes", false: "no"}[signs])
	}
	return tw.Flush()
}
