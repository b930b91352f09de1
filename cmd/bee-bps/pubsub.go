// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/api"
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
	fl.StringVar(&f.cluster, "cluster", "", "the `file` bee-bps dev --info-file wrote: the broker is its first node, the API that of --node")
	fl.IntVar(&f.node, "node", 1, "with --cluster: which node's API to use (1 or more; 0 is the broker, which cannot join its own cohorts)")
	fl.StringVar(&f.topic, "topic", "", "feed mode: the feed topic (64 hex characters, or a name hashed with keccak256); GSOC mode: the SOC address (64 hex characters), or leave empty with --gsoc-id and --gsoc-owner")
	fl.StringVar(&f.admin, "admin", "", "feed mode (a live stream): the admin's address; without it, GSOC mode")
	fl.StringVar(&f.gsocID, "gsoc-id", "", "GSOC mode: the SOC id (hex, or a name hashed with keccak256)")
	fl.StringVar(&f.gsocOwner, "gsoc-owner", "", "GSOC mode: the SOC owner's address (sub; pub uses its key's)")
}

// resolve fills api and peer from a dev cluster's info file.
func (f *clientFlags) resolve(cmd *cobra.Command) error {
	if f.cluster != "" {
		b, err := os.ReadFile(f.cluster)
		if err != nil {
			return fmt.Errorf("--cluster %s: %w", f.cluster, pathErr(err))
		}
		var c devCluster
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("--cluster %s: not a bee-bps dev --info-file file: %w", f.cluster, err)
		}
		if len(c.Nodes) == 0 || len(c.Nodes[0].Underlays) == 0 {
			return fmt.Errorf("--cluster %s: no broker (its first node) with an underlay", f.cluster)
		}
		if !cmd.Flags().Changed("api") {
			last := len(c.Nodes) - 1
			switch {
			case last == 0:
				return fmt.Errorf("--cluster %s has only the broker, which cannot join its own cohorts: run bee-bps dev with --nodes 2 or more", f.cluster)
			case f.node == 0:
				return fmt.Errorf("--node 0 is the broker, which cannot join its own cohorts: use %s", nodeRange(last))
			case f.node < 0 || f.node > last:
				return fmt.Errorf("--node %d: %s has no such node: use %s (0 is the broker)", f.node, f.cluster, nodeRange(last))
			}
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

// nodeRange names the nodes 1 to last.
func nodeRange(last int) string {
	if last == 1 {
		return "--node 1"
	}
	return fmt.Sprintf("--node 1 to %d", last)
}

// hash32 reads a topic or GSOC id as the node's API reads {topic}: 64 hex
// characters (0x optional) are the value itself, anything else a name that
// is hashed, and what looks like a mistyped address is refused.
func hash32(name, s string) ([]byte, error) {
	b, err := api.ParseTopic(s)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %w", name, s, err)
	}
	return b, nil
}

// hex32 reads 64 hex characters (0x optional).
func hex32(s string) ([]byte, bool) {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	return b, err == nil && len(b) == 32
}

func hexAddr(name, s string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil || len(b) != 20 {
		return nil, fmt.Errorf("--%s %s: want a 20-byte address, 40 hex characters", name, s)
	}
	return b, nil
}

// options builds the session options; owner is the GSOC owner where known
// (pub: its key's address). The mode is feed with --admin, GSOC with
// --gsoc-id, --gsoc-owner or a topic that is an SOC address; a topic name
// without any of them is refused rather than guessed.
func (f *clientFlags) options(owner []byte, publishing bool) (o wsclient.Options, id []byte, err error) {
	o = wsclient.Options{API: f.api, Peer: f.peer}
	gsocFlags := f.gsocID != "" || f.gsocOwner != ""
	if f.admin != "" {
		if gsocFlags {
			return o, nil, errors.New("--gsoc-id and --gsoc-owner are GSOC mode's, --admin feed mode's: give one or the other")
		}
		o.Mode = wsclient.Feed
		if o.Admin, err = hexAddr("admin", f.admin); err != nil {
			return o, nil, err
		}
		if f.topic == "" {
			return o, nil, errors.New("--topic is required in feed mode")
		}
		o.Topic, err = hash32("topic", f.topic)
		return o, nil, err
	}
	socAddr, isAddr := hex32(f.topic)
	if !gsocFlags && !isAddr {
		what := "--topic " + f.topic + " without --admin"
		if f.topic == "" {
			what = "no --topic and no --admin"
		}
		return o, nil, fmt.Errorf("%s: for a live stream (feed mode) give --admin <the publisher's address, printed by bee-bps keygen>; for bee-js's GSOC mode give --gsoc-id and --gsoc-owner, or --topic as the SOC address (64 hex characters)", what)
	}
	o.Mode = wsclient.GSOC
	if f.gsocID != "" {
		if id, err = hash32("gsoc-id", f.gsocID); err != nil {
			return o, nil, err
		}
	}
	if f.gsocOwner != "" {
		if publishing {
			return o, nil, errors.New("--gsoc-owner is sub's: pub publishes as its key's address")
		}
		if owner, err = hexAddr("gsoc-owner", f.gsocOwner); err != nil {
			return o, nil, err
		}
	}
	switch {
	case f.topic != "" && !isAddr:
		return o, nil, fmt.Errorf("--topic %s: in GSOC mode the topic is the SOC address, 64 hex characters (or leave it out and give --gsoc-id and --gsoc-owner)", f.topic)
	case isAddr && id != nil && owner != nil:
		want, err := wsclient.GSOCAddress(id, owner)
		if err != nil {
			return o, nil, err
		}
		if !bytes.Equal(want, socAddr) {
			return o, nil, fmt.Errorf("--topic %x is not the SOC address of --gsoc-id and its owner (%x)", socAddr, want)
		}
		o.Topic = socAddr
	case isAddr:
		o.Topic = socAddr
	case id == nil || owner == nil:
		return o, nil, errors.New("GSOC mode needs --topic (the SOC address) or --gsoc-id and --gsoc-owner")
	default:
		if o.Topic, err = wsclient.GSOCAddress(id, owner); err != nil {
			return o, nil, err
		}
	}
	return o, id, nil
}

// sessionMode says which session o opens, for the user.
func sessionMode(o wsclient.Options) string {
	if o.Mode == wsclient.Feed {
		return fmt.Sprintf("feed mode: topic %x, admin %x", o.Topic, o.Admin)
	}
	return fmt.Sprintf("GSOC mode (no --admin): SOC %x", o.Topic)
}

func (c *command) initSubCmd() {
	var f clientFlags
	var asJSON bool
	var count int
	var from int64
	cmd := &cobra.Command{
		Use:   "sub",
		Short: "Subscribe to a cohort through a node's API and print what arrives",
		Long: `Subscribe to a cohort through a node's API and print each message that
arrives, on standard output; what the command does (connected, which
mode) goes to standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 0 {
				return fmt.Errorf("--count %d: want 0 (until interrupted) or more", count)
			}
			if err := f.resolve(cmd); err != nil {
				return err
			}
			o, _, err := f.options(nil, false)
			if err != nil {
				return err
			}
			var owner []byte
			if from >= 0 {
				if o.Mode != wsclient.Feed {
					return errors.New("--from is feed mode's (--admin): the index to resume at")
				}
				resume := uint64(from)
				o.Resume = &resume
			}
			if o.Mode == wsclient.Feed {
				o.Fields = "index,address,payload"
				owner = o.Admin
			} else {
				o.Fields = "address,signature,span,payload"
				if f.gsocOwner != "" {
					owner, _ = hexAddr("gsoc-owner", f.gsocOwner)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := wsclient.Subscribe(ctx, o)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			defer func() { _ = s.Close() }()
			fmt.Fprintf(cmd.ErrOrStderr(), "connected to %s through broker %s; %s; waiting for messages\n", o.API, o.Peer, sessionMode(o))
			out := cmd.OutOrStdout()
			for n := 0; count == 0 || n < count; {
				m, text, err := s.Next(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if text != nil {
					switch t := text["type"]; {
					case asJSON:
						_ = json.NewEncoder(out).Encode(text)
					case t == "recovered" || t == "gap":
						what := "recovered from storage"
						if t == "gap" {
							what = "missed, not recovered"
						}
						fmt.Fprintf(cmd.ErrOrStderr(), "updates %v to %v of %v: %s\n", text["from"], text["to"], text["addr"], what)
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
	cmd.Flags().Int64Var(&from, "from", -1, "feed mode: resume at this index; the node recovers the updates missed before the first live one from storage (published with --postage-batch-id)")
	c.root.AddCommand(cmd)
}

// loadSigner reads a hex private key from the flag or the file.
func loadSigner(keyHex, keyFile string) (crypto.Signer, error) {
	what := "--key"
	if keyFile != "" {
		if keyHex != "" {
			return nil, errors.New("give --key or --key-file, not both")
		}
		b, err := os.ReadFile(keyFile)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("key file %s does not exist (bee-bps keygen --out %s makes one)", keyFile, keyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", keyFile, pathErr(err))
		}
		keyHex = strings.TrimSpace(string(b))
		what = "key file " + keyFile
		if keyHex == "" {
			return nil, fmt.Errorf("%s is empty: want a secp256k1 private key, 64 hex characters (bee-bps keygen writes one)", what)
		}
	}
	if keyHex == "" {
		return nil, errors.New("a key is needed: --key or --key-file")
	}
	b, err := hex.DecodeString(strings.TrimPrefix(keyHex, "0x"))
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("%s does not hold a private key: want a secp256k1 private key, 64 hex characters (bee-bps keygen writes one)", what)
	}
	pk := crypto.Secp256k1PrivateKeyFromBytes(b)
	if pk.D.Sign() == 0 || pk.D.Cmp(new(big.Int).SetBytes(b)) != 0 {
		return nil, fmt.Errorf("%s: the key is not a valid secp256k1 private key (zero, or not below the curve order)", what)
	}
	return crypto.NewDefaultSigner(pk), nil
}

func (c *command) initKeygenCmd() {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make a publisher key: writes the private key (hex) to --out and prints its address",
		Args:  cobra.NoArgs,
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
			data := []byte(hex.EncodeToString(b) + "\n")
			if force {
				err = writeAtomic(out, data, 0o600)
			} else {
				err = writeNew(out, data)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), hex.EncodeToString(addr.Bytes()))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "publisher.key", "where to write the private key")
	cmd.Flags().BoolVar(&force, "force", false, "replace the key file if it exists (its key is lost, and with it the feeds it signs)")
	c.root.AddCommand(cmd)
}

// writeNew writes a new private file; an existing one is refused.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists: keygen does not replace a key (the feeds it signs would be lost); choose another --out, or --force", path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	_, err = f.Write(b)
	if err = errors.Join(err, f.Close()); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	return nil
}
