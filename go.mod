module github.com/ethersphere/bps

go 1.26

require github.com/ethersphere/bee/v2 v2.8.1

require (
	go.uber.org/goleak v1.3.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/ethersphere/batch-archive => github.com/ethersphere/batch-archive v0.0.5

replace github.com/codahale/hdrhistogram => github.com/HdrHistogram/hdrhistogram-go v0.0.0-20200919145931-8dac23c8dac1
