module github.com/packet-steering/packet-steering

go 1.23.0

require golang.org/x/sys v0.35.0
