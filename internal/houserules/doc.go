// Package houserules checks, as a test, the rules of the repository's own
// shape that a review would otherwise have to remember: River's table
// format named in one file, functions of the core packages short enough to
// read as named steps, comments that cite only what the repository holds,
// and a README that stays a ten-minute read linking every docs/ page.
package houserules
