package providers

import "crypto/sha256"

// ContentDigest returns a ContentKeyer's key for signed content: the SHA-256
// of scheme, a zero byte, then parts written in order. scheme is the
// adapter's registered name (it contains no zero byte), so that equal content
// signed under two schemes never yields one key. It allocates only the
// returned digest.
func ContentDigest(scheme string, parts ...[]byte) []byte {
	h := sha256.New()
	h.Write([]byte(scheme))
	h.Write([]byte{0})
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(make([]byte, 0, sha256.Size))
}
