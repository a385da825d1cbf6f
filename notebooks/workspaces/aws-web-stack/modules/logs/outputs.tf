output "bucket_name" {
  value = aws_s3_bucket.access_logs.bucket
}
