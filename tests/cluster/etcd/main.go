// The etcd binary of the real-cluster tier. etcd's own main package lives in its root
// module, whose go.mod replaces its sibling modules with local paths and so cannot be
// built from the module proxy; this is that main, on go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
