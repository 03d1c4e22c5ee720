// Package testtls makes a throwaway certificate authority and a server
// certificate for 127.0.0.1 signed by it, for tests that serve TLS on
// loopback (the certificate serves both ends of mutual TLS): in process (Server, Pool) or as files for a child process
// (WriteFiles: the server's certificate and key, and the CA a client
// trusts). The keys live as long as the test; nothing is trusted beyond
// it, since each CA is made anew and valid for an hour around now.
package testtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is one test's certificate authority and the 127.0.0.1 server
// certificate it signed.
type CA struct {
	// Pool trusts the CA, for a client's RootCAs.
	Pool *x509.CertPool
	// Server serves the 127.0.0.1 certificate, TLS 1.2 at least.
	Server *tls.Config
	// CAPEM, CertPEM and KeyPEM are the CA's certificate, the server's
	// certificate and the server's PKCS #8 key, PEM-encoded.
	CAPEM, CertPEM, KeyPEM []byte
}

// Files are where WriteFiles put a CA's PEM files.
type Files struct {
	Cert, Key string // the server's certificate and key
	CA        string // the CA's certificate, for a client to trust
}

// New makes a CA named name (its subject's common name) and a server
// certificate for 127.0.0.1 signed by it; a failure fails the test.
func New(t testing.TB, name string) *CA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Pool: x509.NewCertPool(),
		Server:  &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12},
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
	ca.Pool.AddCert(caCert)
	return ca
}

// WriteFiles writes the PEM files into dir as cert.pem, key.pem and
// ca.pem, readable by the owner only; a failure fails the test.
func (ca *CA) WriteFiles(t testing.TB, dir string) Files {
	t.Helper()
	f := Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), CA: filepath.Join(dir, "ca.pem")}
	for path, b := range map[string][]byte{f.Cert: ca.CertPEM, f.Key: ca.KeyPEM, f.CA: ca.CAPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
