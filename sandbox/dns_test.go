//go:build linux

package sandbox_test

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers every A query on the host's 127.0.0.1 with 127.0.0.2 and
// counts the queries it receives.
func dnsServer(t *testing.T) (port string, queries *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	queries = new(atomic.Int64)
	go func() {
		buf := make([]byte, 512)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			queries.Add(1)
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60},
					dnsmessage.AResource{A: [4]byte{127, 0, 0, 2}})
			}
			msg, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(msg, addr)
			}
		}
	}()
	return strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port), queries
}
