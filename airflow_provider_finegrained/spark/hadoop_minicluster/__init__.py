"""Resources of the loopback Hadoop cluster (spark/hadoop_cluster.py): its Maven pom, Java launcher and log settings."""
