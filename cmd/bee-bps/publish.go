// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/spf13/cobra"
)

// pub publishes and confirms: besides its publishing session it holds a
// receiving session on the same node, and an update counts as delivered
// once it has come back through the broker on that session. An update that
// has not come back within --timeout fails the command: the broker answers
// nothing (SWIP-74), and drops without a word an update it cannot take —
// an index the feed has passed, a copy of a message it has seen, a cohort
// that has ended.
//
// In feed mode the next index is kept per (owner, topic) in a state file
// beside the key file, so that a second pub continues the feed where the
// first stopped; --index overrides it.

const (
	// defaultReceiptTimeout bounds the wait for an update to come back.
	defaultReceiptTimeout = 10 * time.Second
	// receiptWindow bounds the updates sent and not yet confirmed; the
	// node's session queue (64 frames) is the ceiling.
	receiptWindow = 32
	// maxLine bounds a line of standard input: longer than a message can
	// be, so that the size check names the limit.
	maxLine = 64 << 10
	// stateSuffix names the state file beside the key file.
	stateSuffix = ".feeds"
)

type pubFlags struct {
	clientFlags
	keyHex, keyFile, stateFile string
	batch                      string
	index                      uint64
	timeout                    time.Duration
}

func (c *command) initPubCmd() {
	var f pubFlags
	cmd := &cobra.Command{
		Use:   "pub [message ...]",
		Short: "Publish through a node's API, signing locally; messages from the arguments, else one per line of stdin",
		Long: `Publish through a node's API, signing locally: the messages are the
arguments, or else one per line of standard input. Each is confirmed: pub
also receives the cohort on the same node and waits, up to --timeout, for
every update to come back through the broker; one that does not is an error.

In feed mode (--admin) the feed's next index is kept beside the key file
(--key-file PATH: PATH` + stateSuffix + `), per owner and topic, so that a second
pub continues the feed where the last one stopped. --index overrides it;
an index the broker has passed is dropped there and reported here.`,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.keyHex, "key", "", "the publisher's secp256k1 private key, hex")
	fl.StringVar(&f.keyFile, "key-file", "", "a file holding the private key, hex (bee-bps keygen writes one)")
	fl.Uint64Var(&f.index, "index", 0, "feed mode: the first update's index (default: the next one the state file records, else 0)")
	fl.StringVar(&f.stateFile, "state-file", "", "feed mode: where the next index of each feed is kept (default: the key file's path + "+stateSuffix+"; none with --key)")
	fl.DurationVar(&f.timeout, "timeout", defaultReceiptTimeout, "how long each update may take to come back through the broker")
	fl.StringVar(&f.batch, "postage-batch-id", "", "persist: the node uploads every update, stamped with this postage batch of the node's (64 hex characters; bee-bps dev prints each node's)")
	c.root.AddCommand(cmd)
}

func (f *pubFlags) run(cmd *cobra.Command, args []string) error {
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", f.timeout)
	}
	for i, a := range args {
		if err := checkPayload(fmt.Sprintf("message %d", i+1), []byte(a)); err != nil {
			return err
		}
	}
	if err := f.resolve(cmd); err != nil {
		return err
	}
	signer, err := loadSigner(f.keyHex, f.keyFile)
	if err != nil {
		return err
	}
	addr, err := signer.EthereumAddress()
	if err != nil {
		return err
	}
	o, id, err := f.options(addr.Bytes(), true)
	if err != nil {
		return err
	}
	if f.batch != "" {
		b, ok := hex32(f.batch)
		if !ok {
			return fmt.Errorf("--postage-batch-id %s: want a batch id, 64 hex characters", f.batch)
		}
		o.PostageBatch = b
	}
	p := &publisher{signer: signer, owner: addr.Bytes(), o: o, id: id, timeout: f.timeout, log: cmd.ErrOrStderr()}
	if o.Mode == wsclient.Feed {
		if string(o.Admin) != string(addr.Bytes()) {
			return fmt.Errorf("the key's address %x is not the admin %x: in feed mode pub publishes the admin's feed", addr.Bytes(), o.Admin)
		}
		if err := p.startIndex(f, cmd.Flags().Changed("index")); err != nil {
			return err
		}
	} else if id == nil {
		return errors.New("GSOC mode needs --gsoc-id (the SOC id pub signs under)")
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = p.open(ctx)
	if err == nil {
		src := argsSource(args)
		if len(args) == 0 {
			done := make(chan struct{})
			defer close(done)
			src = linesSource(cmd.InOrStdin(), done)
		}
		err = p.publishAll(ctx, src)
	}
	p.close()
	if serr := p.saveIndex(); serr != nil {
		err = errors.Join(err, serr)
	} else if p.state != nil {
		p.state, _ = loadFeedState(p.state.path) // for the summary
	}
	if ctx.Err() != nil && p.delivered == p.sent {
		// Interrupted with nothing outstanding: the way to end typed input.
		err = nil
	}
	fmt.Fprintln(p.log, p.summary())
	return err
}

// checkPayload refuses a message a chunk cannot hold.
func checkPayload(what string, b []byte) error {
	if len(b) > swarm.ChunkSize {
		return fmt.Errorf("%s is %d bytes: a message holds at most %d bytes (one chunk's payload)", what, len(b), swarm.ChunkSize)
	}
	return nil
}

// source yields the messages to publish: ok false at the end.
type source func(ctx context.Context) (msg []byte, what string, ok bool, err error)

func argsSource(args []string) source {
	i := 0
	return func(context.Context) ([]byte, string, bool, error) {
		if i == len(args) {
			return nil, "", false, nil
		}
		i++
		return []byte(args[i-1]), fmt.Sprintf("message %d", i), true, nil
	}
}

// line is one line of input, or the error that ended the input.
type line struct {
	msg  []byte
	what string
	err  error // io.EOF at the end
}

// linesSource reads r on a goroutine of its own, so that an interrupt is
// not stuck behind a read of a terminal. The goroutine ends at the end of
// r or when done is closed and it has a line to hand over; a read of a
// terminal that never returns is left to the process's exit.
func linesSource(r io.Reader, done <-chan struct{}) source {
	lines := make(chan line)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), maxLine)
		n := 0
		for {
			var l line
			if sc.Scan() {
				n++
				l = line{msg: bytes.Clone(sc.Bytes()), what: fmt.Sprintf("line %d of standard input", n)}
			} else {
				l.err = sc.Err()
				if l.err == nil {
					l.err = io.EOF
				} else if errors.Is(l.err, bufio.ErrTooLong) {
					l.err = fmt.Errorf("line %d of standard input is over %d bytes: a message holds at most %d bytes (one chunk's payload)", n+1, maxLine, swarm.ChunkSize)
				}
			}
			select {
			case lines <- l:
			case <-done:
				return
			}
			if l.err != nil {
				return
			}
		}
	}()
	return func(ctx context.Context) ([]byte, string, bool, error) {
		select {
		case l := <-lines:
			if l.err == io.EOF {
				return nil, "", false, nil
			}
			if l.err != nil {
				return nil, "", false, l.err
			}
			return l.msg, l.what, true, checkPayload(l.what, l.msg)
		case <-ctx.Done():
			return nil, "", false, ctx.Err()
		}
	}
}

// publisher is one pub run: the publishing session, the receiving session
// that confirms each update, and the feed index.
type publisher struct {
	signer  crypto.Signer
	owner   []byte // the signer's address
	o       wsclient.Options
	id      []byte // GSOC mode: the SOC id
	timeout time.Duration
	log     io.Writer

	// Feed mode.
	next      uint64 // the index the next update takes
	first     uint64 // the first index of this run
	state     *feedState
	stateKey  string
	stateFrom string // how next was chosen, for the log

	pub, rcv *wsclient.Session
	wg       sync.WaitGroup // the two session readers
	receipts chan [32]byte  // receipt keys of messages received (receiptKey)
	failed   chan error     // a session ended
	cancel   context.CancelFunc

	sent, delivered int
	pending         []sentUpdate // in the order sent
}

type sentUpdate struct {
	sig      [32]byte // its receipt key
	what     string
	index    uint64 // feed mode
	deadline time.Time
}

// startIndex chooses the first index: --index, else the state file's, else 0.
func (p *publisher) startIndex(f *pubFlags, explicit bool) error {
	path := f.stateFile
	if path == "" && f.keyFile != "" {
		path = f.keyFile + stateSuffix
	}
	if path != "" {
		st, err := loadFeedState(path)
		if err != nil {
			return err
		}
		p.state = st
		p.stateKey = hex.EncodeToString(p.o.Admin) + "/" + hex.EncodeToString(p.o.Topic)
	}
	switch next, ok := p.state.get(p.stateKey); {
	case explicit:
		p.next, p.stateFrom = f.index, "--index"
	case ok:
		p.next, p.stateFrom = next, "continuing from "+p.state.path
	case p.state != nil:
		p.stateFrom = "a new feed in " + p.state.path
	default:
		p.stateFrom = "no state file (--key without --state-file)"
	}
	p.first = p.next
	return nil
}

// saveIndex records the index after the last update sent, delivered or
// not, unless the state holds a later one (a run with a lower --index): the
// state is the lowest index this key has never signed for the feed, so
// that an index is never signed twice with different content.
func (p *publisher) saveIndex() error {
	if p.state == nil || p.sent == 0 {
		return nil
	}
	return p.state.set(p.stateKey, p.next)
}

// open opens the receiving session, then the publishing one, and starts a
// reader on each.
func (p *publisher) open(ctx context.Context) error {
	ctx, p.cancel = context.WithCancel(ctx)
	ro := p.o
	ro.Fields = "signature,payload"
	if p.o.Mode == wsclient.Feed {
		// A live update is signed under the publishing stream's
		// challenge (SWIP-74 Rev 8), re-signed under a new one after a
		// rejoin: it is recognised by its index and payload.
		ro.Fields = "index,payload"
	}
	rcv, err := wsclient.Subscribe(ctx, ro)
	if err != nil {
		return fmt.Errorf("open the receiving session that confirms delivery: %w", err)
	}
	p.rcv = rcv
	if p.o.Mode == wsclient.Feed {
		p.pub, err = wsclient.PublishFeed(ctx, p.o, p.signer, p.next)
	} else {
		p.pub, err = wsclient.PublishGSOC(ctx, p.o, p.owner, p.id)
	}
	if err != nil {
		return fmt.Errorf("open the publishing session: %w", err)
	}
	p.receipts = make(chan [32]byte, receiptWindow)
	p.failed = make(chan error, 2)
	p.wg.Add(2)
	go p.readReceipts(ctx)
	go p.readPublisher(ctx)
	if p.o.Mode == wsclient.Feed {
		fmt.Fprintf(p.log, "publishing feed %x of %x through %s from index %d (%s)\n", p.o.Topic, p.o.Admin, p.o.API, p.next, p.stateFrom)
	} else {
		fmt.Fprintf(p.log, "publishing GSOC %x (id %x) through %s\n", p.o.Topic, p.id, p.o.API)
	}
	return nil
}

// readReceipts passes on the signature of every message the receiving
// session gets.
func (p *publisher) readReceipts(ctx context.Context) {
	defer p.wg.Done()
	for {
		m, err := p.rcv.NextMessage(ctx)
		if err != nil {
			p.failed <- fmt.Errorf("the receiving session ended: %w", err)
			return
		}
		sig := p.receiptKey(m.Index, m.Signature, m.Payload)
		select {
		case p.receipts <- sig:
		case <-ctx.Done():
			return
		}
	}
}

// readPublisher reads the publishing session: it answers the node's claim
// requests and learns of its end.
func (p *publisher) readPublisher(ctx context.Context) {
	defer p.wg.Done()
	for {
		_, text, err := p.pub.Next(ctx)
		if err != nil {
			p.failed <- fmt.Errorf("the publishing session ended: %w", err)
			return
		}
		if text != nil && text["type"] == "error" {
			p.failed <- fmt.Errorf("the node ended the publishing session: %v", text["reason"])
			return
		}
	}
}

// close ends both sessions and waits for their readers.
func (p *publisher) close() {
	for _, s := range []*wsclient.Session{p.pub, p.rcv} {
		if s != nil {
			_ = s.Close()
		}
	}
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

// publishAll sends every message of src, at most receiptWindow of them
// unconfirmed at a time, and waits until each is confirmed.
func (p *publisher) publishAll(ctx context.Context, src source) error {
	for {
		msg, what, ok, err := src(ctx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		for len(p.pending) >= receiptWindow {
			if err := p.await(ctx); err != nil {
				return err
			}
		}
		if err := p.send(msg, what); err != nil {
			return err
		}
	}
	for len(p.pending) > 0 {
		if err := p.await(ctx); err != nil {
			return err
		}
	}
	return nil
}

// send signs and sends one message.
func (p *publisher) send(msg []byte, what string) error {
	// The signature is what the receiving session recognises: sign as the
	// session will (bee's signer is deterministic).
	u := sentUpdate{what: what, index: p.next}
	var err error
	if p.o.Mode == wsclient.Feed {
		u.sig = p.receiptKey(p.next, nil, msg)
	} else {
		frame, err := wsclient.GSOCFrame(p.signer, p.id, msg) // signature ‖ span ‖ payload
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		u.sig = p.receiptKey(0, frame[:swarm.SocSignatureSize], msg)
	}
	if p.o.Mode == wsclient.Feed {
		err = p.pub.SendFeedUpdate(p.signer, p.next, msg)
	} else {
		err = p.pub.SendGSOC(p.signer, p.id, msg)
	}
	if err != nil {
		return fmt.Errorf("%s: send: %w", what, err)
	}
	if p.o.Mode == wsclient.Feed {
		p.next++
	}
	p.sent++
	u.deadline = time.Now().Add(p.timeout)
	p.pending = append(p.pending, u)
	return nil
}

// receiptKey is what recognises a message of this run coming back: in feed
// mode its index and payload (a live update's signature is under the
// publishing stream's challenge), in GSOC mode its signature (bee's signer
// is deterministic: the same as the session's).
func (p *publisher) receiptKey(index uint64, sig, payload []byte) [32]byte {
	h := sha256.New()
	if p.o.Mode == wsclient.Feed {
		h.Write(binary.BigEndian.AppendUint64(nil, index))
	} else {
		h.Write(sig)
	}
	h.Write(payload)
	var k [32]byte
	copy(k[:], h.Sum(nil))
	return k
}

// await handles one event: a receipt, a session's end, or the oldest
// pending update's deadline.
func (p *publisher) await(ctx context.Context) error {
	oldest := p.pending[0]
	timer := time.NewTimer(time.Until(oldest.deadline))
	defer timer.Stop()
	select {
	case sig := <-p.receipts:
		for i, u := range p.pending {
			if u.sig == sig {
				p.pending = append(p.pending[:i], p.pending[i+1:]...)
				p.delivered++
				break
			}
		}
		return nil // a message that is not ours: another publisher's
	case err := <-p.failed:
		return fmt.Errorf("%s not confirmed: %w", p.describe(oldest), err)
	case <-timer.C:
		return p.undelivered(oldest)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *publisher) describe(u sentUpdate) string {
	if p.o.Mode == wsclient.Feed {
		return fmt.Sprintf("%s (index %d)", u.what, u.index)
	}
	return u.what
}

// undelivered explains an update that did not come back.
func (p *publisher) undelivered(u sentUpdate) error {
	why := "the broker drops a message identical to one it has seen: in GSOC mode, the same id and the same payload"
	if p.o.Mode == wsclient.Feed {
		why = "the broker drops an update whose index its feed cursor has passed, and every update once the admin has ended the cohort"
		if next, ok := p.state.get(p.stateKey); ok && next > u.index {
			why += fmt.Sprintf("; this key has signed this feed up to index %d (%s): run pub without --index to continue at %d", next-1, p.state.path, next)
		} else {
			why += "; if this feed was published past it from elsewhere, give --index <its next index>"
		}
	}
	return fmt.Errorf("%s was not delivered: it did not come back through the broker within %s (%s)", p.describe(u), p.timeout, why)
}

// summary says what this run published.
func (p *publisher) summary() string {
	s := fmt.Sprintf("%d of %d messages delivered", p.delivered, p.sent)
	if p.o.Mode == wsclient.Feed && p.sent > 0 {
		s += fmt.Sprintf(", indexes %d to %d", p.first, p.next-1)
		if next, ok := p.state.get(p.stateKey); ok {
			s += fmt.Sprintf("; the next index, %d, is kept in %s", next, p.state.path)
		}
	}
	return s
}

// feedState is the state file: the next index per feed, keyed by
// "<owner hex>/<topic hex>".
type feedState struct {
	path string
	next map[string]uint64
}

// loadFeedState reads path; a missing file is an empty state.
func loadFeedState(path string) (*feedState, error) {
	st := &feedState{path: path, next: make(map[string]uint64)}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, pathErr(err))
	}
	var file struct {
		Next map[string]uint64 `json:"next"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		return nil, fmt.Errorf("state file %s: not a pub state file (%w); move it away, and give --index to continue a feed", path, err)
	}
	for k, v := range file.Next {
		st.next[k] = v
	}
	return st, nil
}

func (st *feedState) get(key string) (uint64, bool) {
	if st == nil {
		return 0, false
	}
	v, ok := st.next[key]
	return v, ok
}

// set records next for key unless the file holds a later index for it,
// re-reading the file first so that runs on other feeds in between are
// kept.
func (st *feedState) set(key string, next uint64) error {
	cur, err := loadFeedState(st.path)
	if err != nil {
		return err
	}
	cur.next[key] = max(cur.next[key], next)
	b, err := json.MarshalIndent(struct {
		Next map[string]uint64 `json:"next"`
	}{cur.next}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(st.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	return nil
}
