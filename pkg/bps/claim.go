// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// claimDomain separates claim signatures from SOC signatures and any other
// protocol's.
const claimDomain = "bps-claim:v1"

// Signer signs data in bee's SOC convention (EIP-191 prefixed keccak256,
// r ‖ s ‖ v with v 27 or 28). bee's crypto.Signer satisfies it; the HTTP
// bridge implements it by asking the dApp, so the node holds no keys.
type Signer interface {
	Sign(data []byte) ([]byte, error)
}

var (
	errClaimShape     = errors.New("claim is malformed")
	errClaimSignature = errors.New("claim signature does not recover to its address")
	errClaimNotAdmin  = errors.New("claimed address may not publish in this cohort")
	errClaimAddr      = errors.New("claimed address differs from the declared one")
	errNoChallenge    = errors.New("claim on a stream that declared no address: it was issued no challenge")
)

// ClaimDigest is what a claim signs: keccak256("bps-claim:v1" ‖ S ‖ O_B ‖
// uint64BE(index)). The signer then applies the EIP-191 prefix, exactly as for
// a SOC.
func ClaimDigest(challenge []byte, broker swarm.Address, index uint64) []byte {
	var idx [8]byte
	binary.BigEndian.PutUint64(idx[:], index)
	return keccak([]byte(claimDomain), challenge, broker.Bytes(), idx[:])
}

// SignClaim makes the claim for addr on the challenge S issued by broker.
func SignClaim(signer Signer, addr, challenge []byte, broker swarm.Address, index uint64) (*pb.Claim, error) {
	sig, err := signer.Sign(ClaimDigest(challenge, broker, index))
	if err != nil {
		return nil, fmt.Errorf("sign claim: %w", err)
	}
	return ClaimFromSignature(addr, index, sig)
}

// ClaimFromSignature assembles a claim from a 65-byte r ‖ s ‖ v signature made
// elsewhere (by a dApp, through the bridge).
func ClaimFromSignature(addr []byte, index uint64, sig []byte) (*pb.Claim, error) {
	if len(sig) != swarm.SocSignatureSize {
		return nil, fmt.Errorf("claim signature is %d bytes, want %d", len(sig), swarm.SocSignatureSize)
	}
	return &pb.Claim{
		Addr:  bytes.Clone(addr),
		Index: index,
		Auth:  &pb.Auth{R: bytes.Clone(sig[:32]), S: bytes.Clone(sig[32:64]), V: uint32(sig[64])},
	}, nil
}

// claimWellFormed reports whether c has the shape of a claim: a 20-byte
// address and a complete signature. A frame that does not is not a claim at
// all (wrong_stream), one that is but fails is an invalid claim.
func claimWellFormed(c *pb.Claim) bool {
	if c == nil || len(c.Addr) != AddressSize || c.Auth == nil {
		return false
	}
	a := c.Auth
	return len(a.R) == 32 && len(a.S) == 32 && (a.V == 27 || a.V == 28) &&
		len(c.ProtoReflect().GetUnknown()) == 0 && len(a.ProtoReflect().GetUnknown()) == 0
}

// challengeSize is the length of a challenge: 32 random bytes.
const challengeSize = 32

// newChallenge draws a stream's challenge (SWIP-74 Rev 7): 32 random bytes
// for each stream that declares an address, held with the stream, never
// persisted or reused, so that a claim seen once — by the node that bridged
// a dApp, by a relay — cannot be presented again on another stream.
func newChallenge() []byte {
	c := make([]byte, challengeSize)
	if _, err := rand.Read(c); err != nil {
		panic(fmt.Sprintf("bps: draw a challenge: %v", err)) // crypto/rand does not fail on Linux
	}
	return c
}

// VerifyClaim checks that c was signed by c.Addr over challenge, the one
// the stream it came on was issued, and broker's overlay: the check a
// broker makes of every claim, and the one the API makes of a claim a dApp
// signed before the node sends it on (a broker blocklists the sender of a
// bad claim). It does not check who may publish. Its errors say whether the
// claim was malformed, lacked a challenge or was signed by another key.
func VerifyClaim(c *pb.Claim, challenge []byte, broker swarm.Address) error {
	if !claimWellFormed(c) {
		return errClaimShape
	}
	if len(challenge) != challengeSize {
		return errNoChallenge
	}
	return signedBy(c, ClaimDigest(challenge, broker, c.Index))
}

// verifyClaim is VerifyClaim of a claim made to this broker.
func (s *Service) verifyClaim(challenge []byte, c *pb.Claim) error {
	return VerifyClaim(c, challenge, s.overlay)
}

// verifyAttestation checks a forwarded claim: c was signed by c.Addr over
// the challenge and the overlay it carries, those of the node the
// publisher attached to. Whether that node issued the challenge no other
// node can tell (SWIP-61); it does not check who may publish either.
func verifyAttestation(c *pb.Claim) error {
	if !claimWellFormed(c) || len(c.Challenge) != challengeSize || len(c.Broker) != swarm.HashSize {
		return errClaimShape
	}
	return signedBy(c, ClaimDigest(c.Challenge, swarm.NewAddress(c.Broker), c.Index))
}

// signedBy checks that c's signature over digest recovers to c.Addr.
func signedBy(c *pb.Claim, digest []byte) error {
	sig := make([]byte, 0, swarm.SocSignatureSize)
	sig = append(sig, c.Auth.R...)
	sig = append(sig, c.Auth.S...)
	sig = append(sig, byte(c.Auth.V))
	pub, err := crypto.Recover(sig, digest)
	if err != nil {
		return fmt.Errorf("%w: %w", errClaimSignature, err)
	}
	signer, err := crypto.NewEthereumAddress(*pub)
	if err != nil {
		return fmt.Errorf("%w: %w", errClaimSignature, err)
	}
	if !bytes.Equal(signer, c.Addr) {
		return fmt.Errorf("%w: signed by %x, not by addr %x", errClaimSignature, signer, c.Addr)
	}
	return nil
}
