# Image catalog: the names users write as `image = "..."` in job files,
# each mapped to an image on the nodes' shared file system: a SIF, an OCI
# image layout directory, a `docker save` or OCI archive (.tar), or a
# rootfs directory. Nodes unpack OCI and SIF images once, cached by digest.
# bsub refuses names missing here, listing these.

image "pytorch-2.3" {
  source      = "/shared/images/pytorch-2.3-cuda12.1.sif"
  description = "PyTorch 2.3, CUDA 12.1, Python 3.11"
}

image "pytorch-2.2" {
  source      = "/shared/images/pytorch-2.2-cuda12.1.sif"
  description = "PyTorch 2.2, CUDA 12.1, Python 3.10"
}

image "tf-2.15" {
  source      = "/shared/images/tensorflow-2.15-oci.tar"
  description = "TensorFlow 2.15, CUDA 12.2 (OCI archive)"
}

image "ubuntu-22.04" {
  source      = "/shared/images/ubuntu-22.04"
  description = "plain Ubuntu 22.04 rootfs directory"
}
