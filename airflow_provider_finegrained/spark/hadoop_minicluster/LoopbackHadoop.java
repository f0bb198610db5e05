// A real Hadoop cluster on 127.0.0.1 for trying the provider on YARN and HDFS: a MiniDFSCluster (one
// NameNode, one DataNode, WebHDFS on) and a MiniYARNCluster (one ResourceManager, N NodeManagers) from
// hadoop-client-minicluster, the Hadoop that pyspark bundles. Started by
// `python -m airflow_provider_finegrained hadoop start` (scripts/hadoop_cluster.sh), which runs this file
// with Java's single-file launcher; it runs until it is sent SIGTERM.
//
// Settings follow Apache Spark's own YARN suite (BaseYarnClusterSuite): the capacity-scheduler keys the
// shaded jar lacks, the disk-health threshold at 100% (else applications sit in ACCEPTED on a full-ish
// disk), and waiting until the ResourceManager's address is no longer port 0.
//
// Usage: java -cp <classpath> LoopbackHadoop.java <dir> <nodemanagers> <nm-vcores> <nm-memory-mb>
//        <min-allocation-mb> <queue-capacity-percent> [<host>]
// Writes <dir>/conf/{core,hdfs,yarn}-site.xml (a HADOOP_CONF_DIR for clients) and, last, when every
// service is up, <dir>/cluster.properties with the addresses.
//
// <host> (default 127.0.0.1): the address HDFS is reached at. Any other address serves HDFS to other
// hosts (the multi-host rehearsal): the NameNode listens on every address, and the DataNode registers
// from <host> and listens there, since clients go to the address the NameNode saw it register from.
// Zero NodeManagers: HDFS alone, no YARN.

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Properties;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class LoopbackHadoop {
    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]).getAbsoluteFile();
        int nodeManagers = Integer.parseInt(args[1]);
        int vcores = Integer.parseInt(args[2]);
        int memoryMb = Integer.parseInt(args[3]);
        int minAllocationMb = Integer.parseInt(args[4]);
        int queuePercent = Integer.parseInt(args[5]);
        String host = args.length > 6 ? args[6] : "127.0.0.1";
        boolean loopbackOnly = host.equals("127.0.0.1");

        Configuration conf = new YarnConfiguration();
        conf.set("hadoop.tmp.dir", new File(dir, "tmp").getPath());
        conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.setBoolean("dfs.webhdfs.enabled", true);
        conf.setBoolean("dfs.permissions.enabled", false);
        conf.setInt("dfs.replication", 1);
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(dir, "dfs").getPath());
        if (!loopbackOnly) {
            // MiniDFSCluster sets the NameNode's addresses to 127.0.0.1 whatever the configuration says.
            conf.set("dfs.namenode.rpc-bind-host", "0.0.0.0");
            conf.set("dfs.namenode.http-bind-host", "0.0.0.0");
            // The DataNode talks to the NameNode here, so it registers from <host>: clients are sent to the
            // address it registered from (on the NameNode's client port it would be 127.0.0.1).
            conf.set("dfs.namenode.servicerpc-address", host + ":0");
        }
        MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf)
                .numDataNodes(loopbackOnly ? 1 : 0)
                .nameNodePort(0)
                .nameNodeHttpPort(0)
                .build();
        String defaultFs = "hdfs://" + host + ":" + dfs.getNameNodePort();
        InetSocketAddress http = dfs.getNameNode().getHttpAddress();
        conf.set("fs.defaultFS", defaultFs);
        if (!loopbackOnly) {
            for (String key : new String[] {"dfs.datanode.address", "dfs.datanode.http.address",
                    "dfs.datanode.ipc.address"}) {
                conf.set(key, host + ":0");
            }
            // Named by its address (MiniDFSCluster's own hosts argument would resolve it to localhost); the two
            // trues keep the addresses and the name set here (else MiniDFSCluster sets 127.0.0.1).
            conf.set("dfs.datanode.hostname", host);
            conf.setInt("dfs.replication", 1);  // the build above set it to its number of DataNodes: 0
            dfs.startDataNodes(conf, 1, null, true, null, null, null, null, null, false, true, true, null, null, null);
        }
        dfs.waitClusterUp();
        dfs.waitActive();
        // Aggregated logs (`yarn logs`, the RM's log links) go to HDFS as on a real cluster.
        dfs.getFileSystem().mkdirs(new org.apache.hadoop.fs.Path("/tmp/logs"));
        dfs.getFileSystem().mkdirs(new org.apache.hadoop.fs.Path("/user"));

        if (nodeManagers == 0) {
            writeClientConf(dir, defaultFs, host, http.getPort(), null);
            Properties addresses = addresses(defaultFs, host, http.getPort(), null, nodeManagers);
            announce(dir, addresses, null, dfs);
            return;
        }
        conf.set("yarn.resourcemanager.hostname", "127.0.0.1");
        conf.set("yarn.nodemanager.hostname", "127.0.0.1");
        conf.set("yarn.scheduler.capacity.root.queues", "default,small");
        conf.setInt("yarn.scheduler.capacity.root.default.capacity", 100 - queuePercent);
        conf.setInt("yarn.scheduler.capacity.root.default.maximum-capacity", 100 - queuePercent);
        conf.setInt("yarn.scheduler.capacity.root.small.capacity", queuePercent);
        conf.setInt("yarn.scheduler.capacity.root.small.maximum-capacity", queuePercent);
        for (String queue : new String[] {"default", "small"}) {
            String prefix = "yarn.scheduler.capacity.root." + queue;
            conf.setFloat(prefix + ".user-limit-factor", 1);
            conf.set(prefix + ".state", "RUNNING");
            conf.set(prefix + ".acl_submit_applications", "*");
            conf.set(prefix + ".acl_administer_queue", "*");
        }
        conf.setInt("yarn.scheduler.capacity.node-locality-delay", -1);
        // ApplicationMasters may hold half of a queue, as production queues commonly allow (0.2 to 0.5).
        // Hadoop's default, 0.1, let the 8-vcore default queue run one Spark application at a time, the
        // others ACCEPTED with cores free (found by bench shared-cluster --cluster yarn, issue 33).
        conf.setFloat("yarn.scheduler.capacity.maximum-am-resource-percent", 0.5f);
        // Count cores as well as memory when placing containers, as most production clusters do.
        conf.set("yarn.scheduler.capacity.resource-calculator",
                "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator");
        conf.setFloat("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 100.0f);
        conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", memoryMb);
        conf.setInt("yarn.nodemanager.resource.memory-mb", memoryMb);
        conf.setInt("yarn.nodemanager.resource.cpu-vcores", vcores);
        conf.setInt("yarn.scheduler.minimum-allocation-mb", minAllocationMb);
        conf.setInt("yarn.scheduler.maximum-allocation-mb", memoryMb);
        conf.setInt("yarn.scheduler.maximum-allocation-vcores", vcores);
        // Java 17 JVMs reserve far more virtual memory than YARN's default ratio allows.
        conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
        conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
        conf.setBoolean("yarn.log-aggregation-enable", true);
        conf.set("yarn.nodemanager.remote-app-log-dir", "/tmp/logs");
        conf.setInt("yarn.nodemanager.delete.debug-delay-sec", 600);
        conf.setInt("yarn.resourcemanager.am.max-attempts", 2);

        MiniYARNCluster yarn = new MiniYARNCluster("loopback", nodeManagers, 1, 1);
        yarn.init(conf);
        yarn.start();
        Configuration live = yarn.getConfig();
        long deadline = System.currentTimeMillis() + 120_000;
        while (live.get(YarnConfiguration.RM_ADDRESS, "").endsWith(":0")) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the ResourceManager did not bind a port in 120 s");
            }
            Thread.sleep(100);
        }
        live.set("fs.defaultFS", defaultFs);

        writeClientConf(dir, defaultFs, host, http.getPort(), live);
        announce(dir, addresses(defaultFs, host, http.getPort(), live, nodeManagers), yarn, dfs);
    }

    // A client's HADOOP_CONF_DIR: only what spark-submit, HDFS clients and `yarn logs` need, as on a real
    // cluster's gateway host (the services' own settings, such as the minicluster's StaticMapping topology
    // class, would break a client that lacks their classes). No YARN keys when YARN is not running.
    private static void writeClientConf(File dir, String defaultFs, String host, int httpPort, Configuration live)
            throws Exception {
        Configuration client = new Configuration(false);
        client.set("fs.defaultFS", defaultFs);
        client.set("dfs.replication", "1");
        client.set("dfs.namenode.http-address", host + ":" + httpPort);
        if (live != null) {
            for (String key : new String[] {YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
                    YarnConfiguration.RM_WEBAPP_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
                    YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS}) {
                client.set(key, loopback(live.get(key)));
            }
            client.set("yarn.log-aggregation-enable", "true");
            client.set("yarn.nodemanager.remote-app-log-dir", "/tmp/logs");
        }
        File confDir = new File(dir, "conf");
        confDir.mkdirs();
        for (String name : new String[] {"core-site.xml", "hdfs-site.xml", "yarn-site.xml"}) {
            File tmp = new File(confDir, name + ".tmp");
            try (OutputStream out = new FileOutputStream(tmp)) {
                client.writeXml(out);
            }
            Files.move(tmp.toPath(), new File(confDir, name).toPath(), StandardCopyOption.ATOMIC_MOVE);
        }
    }

    private static Properties addresses(String defaultFs, String host, int httpPort, Configuration live,
            int nodeManagers) {
        Properties addresses = new Properties();
        addresses.setProperty("fs.defaultFS", defaultFs);
        addresses.setProperty("namenode.http", "http://" + host + ":" + httpPort);
        if (live != null) {
            addresses.setProperty("resourcemanager.address", loopback(live.get(YarnConfiguration.RM_ADDRESS)));
            addresses.setProperty("resourcemanager.webapp",
                    "http://" + loopback(live.get(YarnConfiguration.RM_WEBAPP_ADDRESS)));
        }
        addresses.setProperty("nodemanagers", Integer.toString(nodeManagers));
        addresses.setProperty("pid", Long.toString(ProcessHandle.current().pid()));
        return addresses;
    }

    // Written last, so its presence says every service is up; then this JVM runs until SIGTERM.
    private static void announce(File dir, Properties addresses, MiniYARNCluster yarn, MiniDFSCluster dfs)
            throws Exception {
        File tmp = new File(dir, "cluster.properties.tmp");
        try (OutputStream out = new FileOutputStream(tmp)) {
            addresses.store(out, "loopback Hadoop cluster");
        }
        Files.move(tmp.toPath(), new File(dir, "cluster.properties").toPath(), StandardCopyOption.ATOMIC_MOVE);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (yarn != null) {
                yarn.stop();
            }
            dfs.shutdown();
        }));
        System.out.println("loopback Hadoop cluster up: " + addresses);
        Thread.currentThread().join();
    }

    // MiniYARNCluster names its services "localhost" whatever the configuration says; they listen on
    // 127.0.0.1, and "localhost" may resolve to ::1 first.
    private static String loopback(String address) {
        return address.replaceFirst("^localhost:", "127.0.0.1:");
    }
}
