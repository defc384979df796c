package salesforce

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// KeyPair is an RSA key with a self-signed certificate, what an admin
// uploads to a JWT bearer connected app (the certificate) and gives to the
// integration (the key). Tests and `sf2loki demo` use it with AddJWTApp.
type KeyPair struct {
	Key         *rsa.PrivateKey
	Certificate *x509.Certificate
	// KeyPEM is the key as PKCS#8 ("PRIVATE KEY", what OpenSSL 3 writes);
	// RSAKeyPEM the same key as PKCS#1 ("RSA PRIVATE KEY").
	KeyPEM         []byte
	RSAKeyPEM      []byte
	CertificatePEM []byte
}

// NewKeyPair generates a 2048-bit RSA key and a certificate valid for a year
// from now.
func NewKeyPair(now time.Time) (*KeyPair, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("simsf: generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "sf2loki-sim", Organization: []string{"sf2loki"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("simsf: certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("simsf: certificate: %w", err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("simsf: key: %w", err)
	}
	return &KeyPair{
		Key:            key,
		Certificate:    cert,
		KeyPEM:         pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}),
		RSAKeyPEM:      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		CertificatePEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}
