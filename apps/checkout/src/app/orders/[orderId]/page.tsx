import { OrderConfirmation } from '@/components/OrderConfirmation';

export default async function OrderPage({
  params,
  searchParams,
}: {
  params: Promise<{ orderId: string }>;
  searchParams: Promise<{ already?: string | string[] }>;
}) {
  const { orderId } = await params;
  const { already } = await searchParams;
  return <OrderConfirmation orderId={orderId} already={already === '1'} />;
}
