// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/spf13/cobra"
)

// The pub and sub commands are clients of a node's /pubsub WebSocket bridge:
// they sign locally (the node holds no keys) and print what arrives.

type clientFlags struct {
	api, peer, topic, admin, gsocID, gsocOwner string
	cluster                                    string
	node                                       int
}

func (f *clientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.api, "api", "http://127.0.0.1:1633", "the node's API URL")
	fl.StringVar(&f.peer, "peer", "", "the broker: its underlay multiaddr (with /p2p/) or overlay hex")
	fl.StringVar(&f.cluster, "cluster", "", "a `bee-bps dev --info-file` file: the broker is its first node, the API that of --node")
	fl.IntVar(&f.node, "node", 1, "with --cluster: which node's API to use (0 is the broker, which cannot join its own cohorts)")
	fl.StringVar(&f.topic, "topic", "", "feed mode: the feed topic (64 hex characters, or a name hashed with keccak256); GSOC mode: the SOC address, or leave empty with --gsoc-id and --gsoc-owner")
	fl.StringVar(&f.admin, "admin", "", "feed mode (a live stream): the admin's address; absent: GSOC mode")
	fl.StringVar(&f.gsocID, "gsoc-id", "", "GSOC mode: the SOC id (hex, or a name hashed with keccak256)")
	fl.StringVar(&f.gsocOwner, "gsoc-owner", "", "GSOC mode: the SOC owner's address (sub; pub uses its key's)")
}

// resolve fills api and peer from a dev cluster's info file.
func (f *clientFlags) resolve(cmd *cobra.Command) error {
	if f.cluster != "" {
		b, err := os.ReadFile(f.cluster)
		if err != nil {
			return fmt.Errorf("--cluster: %w", err)
		}
		var c devCluster
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("--cluster: %w", err)
		}
		if len(c.Nodes) == 0 || f.node < 0 || f.node >= len(c.Nodes) || len(c.Nodes[0].Underlays) == 0 {
			return fmt.Errorf("--cluster: no node %d, or no broker underlay", f.node)
		}
		if !cmd.Flags().Changed("api") {
			f.api = c.Nodes[f.node].API
		}
		if f.peer == "" {
			f.peer = c.Nodes[0].Underlays[0]
		}
	}
	if f.peer == "" {
		return errors.New("--peer (or --cluster) is required")
	}
	return nil
}

// hash32 reads 64 hex characters, or hashes anything else.
func hash32(s string) ([]byte, error) {
	if b, err := hex.DecodeString(strings.TrimPrefix(s, "0x")); err == nil && len(b) == 32 {
		return b, nil
	}
	return crypto.LegacyKeccak256([]byte(s))
}

func hexAddr(name, s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil || len(b) != 20 {
		return nil, fmt.Errorf("--%s: want a 20-byte hex address", name)
	}
	return b, nil
}

// options builds the session options; owner is the GSOC owner where known.
func (f *clientFlags) options(owner []byte) (o wsclient.Options, id []byte, err error) {
	o = wsclient.Options{API: f.api, Peer: f.peer}
	if f.admin != "" {
		o.Mode = wsclient.Feed
		if o.Admin, err = hexAddr("admin", f.admin); err != nil {
			return o, nil, err
		}
		if f.topic == "" {
			return o, nil, errors.New("--topic is required in feed mode")
		}
		o.Topic, err = hash32(f.topic)
		return o, nil, err
	}
	o.Mode = wsclient.GSOC
	if f.gsocID != "" {
		if id, err = hash32(f.gsocID); err != nil {
			return o, nil, err
		}
	}
	if f.topic != "" {
		o.Topic, err = hash32(f.topic)
		return o, id, err
	}
	if id == nil || owner == nil {
		return o, nil, errors.New("GSOC mode needs --topic (the SOC address) or --gsoc-id and the owner")
	}
	o.Topic, err = wsclient.GSOCAddress(id, owner)
	return o, id, err
}

func (c *command) initSubCmd() {
	var f clientFlags
	var asJSON bool
	var count int
	cmd := &cobra.Command{
		Use:   "sub",
		Short: "Subscribe to a cohort through a node's API and print what arrives",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolve(cmd); err != nil {
				return err
			}
			var owner []byte
			if f.gsocOwner != "" {
				var err error
				if owner, err = hexAddr("gsoc-owner", f.gsocOwner); err != nil {
					return err
				}
			}
			o, _, err := f.options(owner)
			if err != nil {
				return err
			}
			if o.Mode == wsclient.Feed {
				o.Fields = "index,address,payload"
				owner = o.Admin
			} else {
				o.Fields = "address,signature,span,payload"
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := wsclient.Subscribe(ctx, o)
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			out := cmd.OutOrStdout()
			for n := 0; count <= 0 || n < count; {
				m, text, err := s.Next(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if text != nil {
					if asJSON {
						_ = json.NewEncoder(out).Encode(text)
					}
					continue
				}
				n++
				if !asJSON {
					fmt.Fprintln(out, string(m.Payload))
					continue
				}
				rec := map[string]any{"address": hex.EncodeToString(m.Raw[:32]), "payload": string(m.Payload)}
				if o.Mode == wsclient.Feed {
					rec["index"] = m.Index
					rec["address"] = hex.EncodeToString(m.Raw[8:40])
				}
				if owner != nil {
					rec["owner"] = hex.EncodeToString(owner)
				}
				if err := json.NewEncoder(out).Encode(rec); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each message as JSON with its index, owner and address")
	cmd.Flags().IntVar(&count, "count", 0, "exit after this many messages (0: until interrupted)")
	c.root.AddCommand(cmd)
}

func (c *command) initPubCmd() {
	var f clientFlags
	var keyHex, keyFile string
	var index uint64
	cmd := &cobra.Command{
		Use:   "pub [message ...]",
		Short: "Publish through a node's API, signing locally; messages from the arguments, else one per line of stdin",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.resolve(cmd); err != nil {
				return err
			}
			signer, err := loadSigner(keyHex, keyFile)
			if err != nil {
				return err
			}
			addr, err := signer.EthereumAddress()
			if err != nil {
				return err
			}
			o, id, err := f.options(addr.Bytes())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var s *wsclient.Session
			if o.Mode == wsclient.Feed {
				if string(o.Admin) != string(addr.Bytes()) {
					return fmt.Errorf("the key's address %x is not the admin %x", addr.Bytes(), o.Admin)
				}
				s, err = wsclient.PublishFeed(ctx, o, signer, index)
			} else {
				if id == nil {
					return errors.New("GSOC mode needs --gsoc-id")
				}
				s, err = wsclient.PublishGSOC(ctx, o, addr.Bytes(), id)
			}
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			send := func(msg string) error {
				if o.Mode == wsclient.Feed {
					err := s.SendFeedUpdate(signer, index, []byte(msg))
					index++
					return err
				}
				return s.SendGSOC(signer, id, []byte(msg))
			}
			if len(args) > 0 {
				for _, a := range args {
					if err := send(a); err != nil {
						return err
					}
				}
				return nil
			}
			sc := bufio.NewScanner(cmd.InOrStdin())
			for sc.Scan() {
				if err := send(sc.Text()); err != nil {
					return err
				}
			}
			return sc.Err()
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&keyHex, "key", "", "the publisher's secp256k1 private key, hex")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "a file holding the private key, hex")
	cmd.Flags().Uint64Var(&index, "index", 0, "feed mode: the first update's index (the claim's cursor)")
	c.root.AddCommand(cmd)
}

// loadSigner reads a hex private key from the flag or the file.
func loadSigner(keyHex, keyFile string) (crypto.Signer, error) {
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		keyHex = strings.TrimSpace(string(b))
	}
	if keyHex == "" {
		return nil, errors.New("a key is needed: --key or --key-file")
	}
	b, err := hex.DecodeString(strings.TrimPrefix(keyHex, "0x"))
	if err != nil || len(b) != 32 {
		return nil, errors.New("the key must be 32 bytes of hex")
	}
	return crypto.NewDefaultSigner(crypto.Secp256k1PrivateKeyFromBytes(b)), nil
}

func (c *command) initKeygenCmd() {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make a publisher key: writes the private key (hex) to --out and prints its address",
		RunE: func(cmd *cobra.Command, _ []string) error {
			pk, err := crypto.GenerateSecp256k1Key()
			if err != nil {
				return err
			}
			b, err := crypto.EncodeSecp256k1PrivateKey(pk)
			if err != nil {
				return err
			}
			addr, err := crypto.NewDefaultSigner(pk).EthereumAddress()
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), hex.EncodeToString(addr.Bytes()))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "publisher.key", "where to write the private key")
	c.root.AddCommand(cmd)
}
