// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"crypto/ecdsa"
	"fmt"
	"path/filepath"

	"github.com/ethersphere/bee/v2/pkg/accesscontrol"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/keystore"
	filekeystore "github.com/ethersphere/bee/v2/pkg/keystore/file"
	memkeystore "github.com/ethersphere/bee/v2/pkg/keystore/mem"
)

// The key names in bee's keystore; using bee's names lets a bee data
// directory be started by this node and back.
const (
	swarmKeyName  = "swarm"
	libp2pKeyName = "libp2p_v2"
	pssKeyName    = "pss"
)

// keys are the identities NewBee takes.
type keys struct {
	signer crypto.Signer
	swarm  *ecdsa.PrivateKey
	libp2p *ecdsa.PrivateKey
	pss    *ecdsa.PrivateKey
}

// loadKeys loads or creates the node's keys: encrypted with password in
// dataDir/keys, or in memory (new ones each start) without a data dir.
func loadKeys(dataDir, password string) (*keys, error) {
	var ks keystore.Service = memkeystore.New()
	if dataDir != "" {
		ks = filekeystore.New(filepath.Join(dataDir, "keys"))
	}
	swarmKey, _, err := ks.Key(swarmKeyName, password, crypto.EDGSecp256_K1)
	if err != nil {
		return nil, fmt.Errorf("swarm key: %w", err)
	}
	libp2pKey, _, err := ks.Key(libp2pKeyName, password, crypto.EDGSecp256_R1)
	if err != nil {
		return nil, fmt.Errorf("libp2p key: %w", err)
	}
	pssKey, _, err := ks.Key(pssKeyName, password, crypto.EDGSecp256_K1)
	if err != nil {
		return nil, fmt.Errorf("pss key: %w", err)
	}
	return &keys{
		signer: crypto.NewDefaultSigner(swarmKey),
		swarm:  swarmKey,
		libp2p: libp2pKey,
		pss:    pssKey,
	}, nil
}

func (k *keys) session() accesscontrol.Session {
	return accesscontrol.NewDefaultSession(k.swarm)
}
