// Package all registers every provider adapter shipped with hookline.
// Import it for its side effect:
//
//	import _ "github.com/hookline/hookline/providers/all"
//
// Adding an adapter is one package under providers/ plus one line here;
// adding a provider of the HMAC family is one entry in providers/hmacspec's
// table (see its package doc).
package all

import (
	_ "github.com/hookline/hookline/providers/adyen"
	_ "github.com/hookline/hookline/providers/appstore"
	_ "github.com/hookline/hookline/providers/braintree"
	_ "github.com/hookline/hookline/providers/checkout"
	_ "github.com/hookline/hookline/providers/coinbase"
	_ "github.com/hookline/hookline/providers/github"
	_ "github.com/hookline/hookline/providers/gocardless"
	_ "github.com/hookline/hookline/providers/googleplay"
	_ "github.com/hookline/hookline/providers/hmac"
	_ "github.com/hookline/hookline/providers/hmacspec"
	_ "github.com/hookline/hookline/providers/lemonsqueezy"
	_ "github.com/hookline/hookline/providers/mailgun"
	_ "github.com/hookline/hookline/providers/mercadopago"
	_ "github.com/hookline/hookline/providers/meta"
	_ "github.com/hookline/hookline/providers/mollie"
	_ "github.com/hookline/hookline/providers/paddle"
	_ "github.com/hookline/hookline/providers/paypal"
	_ "github.com/hookline/hookline/providers/plaid"
	_ "github.com/hookline/hookline/providers/razorpay"
	_ "github.com/hookline/hookline/providers/sendgrid"
	_ "github.com/hookline/hookline/providers/shopify"
	_ "github.com/hookline/hookline/providers/slack"
	_ "github.com/hookline/hookline/providers/sns"
	_ "github.com/hookline/hookline/providers/square"
	_ "github.com/hookline/hookline/providers/standardwebhooks"
	_ "github.com/hookline/hookline/providers/stripe"
	_ "github.com/hookline/hookline/providers/swsenders"
	_ "github.com/hookline/hookline/providers/twilio"
	_ "github.com/hookline/hookline/providers/twitch"
	_ "github.com/hookline/hookline/providers/xendit"
	_ "github.com/hookline/hookline/providers/zoom"
)
